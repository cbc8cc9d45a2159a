"""from_config reads each family's keys and defaults (the values below are read off the configs
in datasets/model_configs and transformers' config classes)."""

import pytest
from conftest import real, small
from modelmath import from_config


@pytest.mark.points(2)
def test_llama_3_8b_reads_gqa_and_untied_head():
    a = from_config(real("llama-3-8b"))
    assert (a.vocab_size, a.hidden_size, a.num_layers) == (128256, 4096, 32)
    assert (a.num_heads, a.num_kv_heads, a.head_dim, a.intermediate_size) == (32, 8, 128, 14336)
    assert (a.tie_embeddings, a.qkv_bias, a.o_bias, a.qk_norm, a.moe, a.mla) == (False, False, False, False, None, None)


@pytest.mark.points(2)
def test_gemma_head_dim_is_the_configs_and_its_head_is_tied_by_default():
    a = from_config(real("gemma-7b"))  # head_dim 256 != 3072 / 16; no tie_word_embeddings key: Gemma ties
    assert (a.head_dim, a.num_kv_heads, a.tie_embeddings) == (256, 16, True)


def test_qwen2_always_has_qkv_bias_and_qwen3_has_qk_norm():
    q2, q3 = from_config(real("qwen2.5-7b")), from_config(real("qwen3-8b"))
    assert (q2.qkv_bias, q2.o_bias, q2.qk_norm) == (True, False, False)
    assert (q3.qkv_bias, q3.qk_norm, q3.head_dim) == (False, True, 128)


@pytest.mark.points(2)
def test_mixtral_and_deepseek_experts():
    mx, ds = from_config(real("mixtral-8x7b")), from_config(real("deepseek-v3"))
    assert (mx.moe.num_experts, mx.moe.top_k, mx.moe.shared_experts, mx.moe.expert_intermediate) == (8, 2, 0, 14336)
    m = ds.moe
    assert (m.num_experts, m.top_k, m.shared_experts, m.expert_intermediate, m.first_dense) == (256, 8, 1, 2048, 3)
    assert (ds.intermediate_size, ds.mtp_layers) == (18432, 1)
    assert (ds.mla.q_lora_rank, ds.mla.kv_lora_rank, ds.mla.qk_rope_head_dim, ds.mla.v_head_dim) == (1536, 512, 64, 128)


def test_missing_kv_heads_means_multi_head_attention():
    cfg = small("llama-3-8b")
    del cfg["num_key_value_heads"]
    assert from_config(cfg).num_kv_heads == 4


def test_unknown_family_and_missing_key_are_refused_by_name():
    with pytest.raises(ValueError, match="gpt2"):
        from_config({"model_type": "gpt2", "hidden_size": 8})
    cfg = small("llama-3-8b")
    assert from_config(dict(cfg)) is not None  # the whole config is accepted
    del cfg["hidden_size"]
    with pytest.raises(ValueError, match="hidden_size"):
        from_config(cfg)
