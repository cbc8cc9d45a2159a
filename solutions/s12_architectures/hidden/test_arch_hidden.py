"""Family defaults and keys beyond the public cases."""

import pytest
from conftest import real, small
from modelmath import from_config, is_moe_layer


def test_llama_with_attention_bias_has_q_k_v_and_o_biases():
    a = from_config(small("llama-3-8b", attention_bias=True))
    assert (a.qkv_bias, a.o_bias) == (True, True)


def test_biases_follow_what_transformers_builds_for_each_family():
    # mistral and mixtral never have attention biases; only llama reads mlp_bias; MLA takes attention_bias
    mixtral = from_config(small("mixtral-8x7b", attention_bias=True, mlp_bias=True))
    assert (mixtral.qkv_bias, mixtral.o_bias, mixtral.mlp_bias) == (False, False, False)
    mistral = from_config(small("llama-3-8b", model_type="mistral", attention_bias=True, mlp_bias=True))
    assert (mistral.qkv_bias, mistral.o_bias, mistral.mlp_bias) == (False, False, False)
    assert from_config(small("llama-3-8b", mlp_bias=True)).mlp_bias is True
    assert from_config(small("qwen2.5-7b", mlp_bias=True)).mlp_bias is False
    deepseek = from_config(small("deepseek-v3", attention_bias=True))
    assert (deepseek.qkv_bias, deepseek.o_bias) == (True, True)


def test_a_gemma_config_without_head_dim_falls_back_to_hidden_over_heads():
    cfg = small("gemma-7b")
    del cfg["head_dim"]
    assert from_config(cfg).head_dim == 48 // 4


def test_an_explicit_untied_gemma_is_untied_and_an_explicit_tied_qwen_is_tied():
    assert from_config(small("gemma-7b", tie_word_embeddings=False)).tie_embeddings is False
    assert from_config(small("qwen2.5-7b", tie_word_embeddings=True)).tie_embeddings is True


def test_deepseek_without_q_lora_rank_and_with_two_dense_layers_first():
    a = from_config(small("deepseek-v3", q_lora_rank=None, first_k_dense_replace=2, num_hidden_layers=5))
    assert a.mla.q_lora_rank is None
    assert [is_moe_layer(a, i) for i in range(5)] == [False, False, True, True, True]


def test_deepseek_v3_reads_its_rope_scaling_type_and_mtp_layers():
    a = from_config(real("deepseek-v3"))
    assert (a.rope_scaling, a.rope_theta, a.mtp_layers) == ("yarn", 10000.0, 1)


def test_a_dense_family_has_no_mtp_layers_even_with_the_key():
    assert from_config(small("llama-3-8b", num_nextn_predict_layers=1)).mtp_layers == 0


@pytest.mark.parametrize("key", ["vocab_size", "num_hidden_layers", "intermediate_size"])
def test_each_required_key_is_named_when_missing(key):
    cfg = small("mixtral-8x7b")
    assert from_config(dict(cfg)) is not None  # the whole config is accepted
    del cfg[key]
    with pytest.raises(ValueError, match=key):
        from_config(cfg)
