"""Counts against transformers for the real configs and for variants the public tests leave out."""

import pytest
from conftest import REAL, SMALL, hf_param_count, real, small
from modelmath import attention_params, from_config, mlp_params, mtp_params, param_count

from autograder.testing import in_worker


@pytest.mark.points(2)
@pytest.mark.parametrize("name", REAL)
def test_param_count_of_each_real_config_equals_transformers(name):
    cfg = real(name)
    assert param_count(from_config(cfg)) == hf_param_count(cfg)


@pytest.mark.parametrize(("name", "more"), [
    ("llama-3-8b", dict(attention_bias=True)),
    ("llama-3-8b", dict(mlp_bias=True)),
    ("llama-3-8b", dict(model_type="mistral", attention_bias=True, mlp_bias=True)),
    ("mixtral-8x7b", dict(attention_bias=True)),
    ("deepseek-v3", dict(attention_bias=True)),
    ("deepseek-v3", dict(attention_bias=True, q_lora_rank=None)),
    ("qwen2.5-7b", dict(tie_word_embeddings=True)),
    ("gemma-7b", dict(tie_word_embeddings=False)),
    ("deepseek-v3", dict(q_lora_rank=None)),
    ("deepseek-v3", dict(num_hidden_layers=4, first_k_dense_replace=0)),
    ("deepseek-v3", dict(n_shared_experts=2, num_experts_per_tok=3)),
    ("mixtral-8x7b", dict(num_experts_per_tok=1, num_local_experts=3)),
])
def test_param_count_of_variants_equals_transformers(name, more):
    cfg = small(name, **more)
    assert param_count(from_config(cfg)) == hf_param_count(cfg)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_layers_parts_add_up_to_the_transformers_layer(name):
    from conftest import hf_model

    cfg = small(name)
    layer = hf_model(cfg, "meta").model.layers[-1]
    a = from_config(cfg)
    attn = sum(p.numel() for p in layer.self_attn.parameters())
    mlp = sum(p.numel() for p in layer.mlp.parameters())
    mlp += sum(b.numel() for n, b in layer.mlp.named_buffers() if n.endswith("e_score_correction_bias"))
    assert (attention_params(a), mlp_params(a, cfg["num_hidden_layers"] - 1)) == (attn, mlp)


def test_active_count_of_a_small_moe_uses_top_k_routed_plus_shared_experts():
    cfg = small("deepseek-v3")  # 3 layers, layer 0 dense; per MoE layer: 8 routed, top 2, 1 shared of 3*64*16
    a = from_config(cfg)
    expert = 3 * 64 * 16
    assert param_count(a) - param_count(a, active=True) == 2 * (8 - 2) * expert


@in_worker
def _course_llama_counted_by_the_package() -> int:
    import coursedata
    from modelmath import unique_param_count as count  # the package's function, beside the model's tensors

    from autograder.testing import oracle

    with oracle():
        state = coursedata.load_model("course-llama").state_dict()
    return count(state)


@pytest.mark.points(2)
def test_tied_weights_in_a_state_dict_count_once():
    import coursedata

    model = coursedata.load_model("course-llama")  # tied: embed_tokens and lm_head share one storage
    assert sum(p.numel() for p in model.state_dict().values()) == 14_160_000  # the walk that counts it twice
    assert _course_llama_counted_by_the_package() == sum(p.numel() for p in model.parameters()) == 11_014_272


@in_worker
def _halves_counted_by_the_package() -> int:
    import torch
    from modelmath import unique_param_count as count

    from autograder.testing import oracle

    with oracle():
        base = torch.arange(10.0)
        views = {"a": base[:5], "b": base[5:], "a_again": base[:5]}
    return count(views)


def test_views_of_one_storage_at_different_offsets_count_separately():
    assert _halves_counted_by_the_package() == 10  # two halves of one storage: 5 + 5, the repeat once


@in_worker
def _prefix_counted_by_the_package() -> int:
    import torch
    from modelmath import unique_param_count as count

    from autograder.testing import oracle

    with oracle():
        whole = torch.zeros(4)
        tensors = {"w": whole, "w_head": whole[:2]}
    return count(tensors)


def test_a_prefix_view_starting_at_the_same_address_counts_its_own_elements():
    # same storage, same offset, different numel: not the same tensor (the docstring's triple), 4 + 2
    assert _prefix_counted_by_the_package() == 6


def test_mtp_layers_are_moe_layers_plus_their_norms_and_projection():
    from conftest import hf_model

    cfg = small("deepseek-v3", num_nextn_predict_layers=2)
    layer = hf_model(cfg, "meta").model.layers[-1]  # an MoE layer, as the MTP layers are (index >= first dense)
    per_layer = sum(p.numel() for p in layer.parameters()) + 8  # + the router's 8 score-correction biases
    h = cfg["hidden_size"]
    # enorm, hnorm and the output norm (3 h), eh_proj (2h -> h, no bias)
    assert mtp_params(from_config(cfg)) == 2 * (per_layer + 3 * h + 2 * h * h)
    assert mtp_params(from_config(small("llama-3-8b"))) == 0
