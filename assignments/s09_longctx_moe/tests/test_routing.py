"""MoE routing against independent oracles (fp32): top-k softmax routing against softmax + topk
computed here; Switch's load-balancing loss against transformers' load_balancing_loss_func;
DeepSeek-V3's gate and MoE layer against transformers' DeepseekV3TopkRouter and DeepseekV3MoE with
the same weights (8 experts in 4 groups, 2 groups eligible, 3 experts a token, route scaling 2.5,
a score-correction bias large enough to change choices). Routings are compared as dense (T, E)
matrices, so the order of a token's k experts does not matter."""

from __future__ import annotations

import pytest
import torch
from conftest import choices_change_with_the_bias, deepseek_moe, dense_routing, hf_gate, hf_moe_output, hf_switch_loss

from longmoe import deepseek_v3_gate, moe_forward, switch_load_balancing_loss, topk_softmax_routing

GATE = {"top_k": 3, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5, "norm_topk_prob": True}


def logits(seed: int, tokens: int = 40, experts: int = 8, spread: float = 2.0) -> torch.Tensor:
    return torch.randn(tokens, experts, generator=torch.Generator().manual_seed(seed)) * spread


@pytest.mark.points(2)
@pytest.mark.parametrize("top_k, normalize", [(2, True), (1, False), (3, False)])
def test_topk_softmax_routing_picks_the_k_most_probable(top_k, normalize, tol):
    x = logits(3)
    probs = torch.softmax(x, dim=-1)
    w, i = probs.topk(top_k, dim=-1)
    w = w / w.sum(-1, keepdim=True) if normalize else w
    got_w, got_i = topk_softmax_routing(x, top_k, normalize)
    torch.testing.assert_close(dense_routing(got_w, got_i, 8), dense_routing(w, i, 8), **tol("routing weights, fp32"),
                               msg=lambda m: f"top_k={top_k}, normalize={normalize}: (token, expert) weights: {m}")


@pytest.mark.points(2)
@pytest.mark.parametrize("top_k", [1, 2])
def test_switch_loss_matches_transformers(top_k, tol):
    x = logits(4, tokens=64)
    got, want = switch_load_balancing_loss(x, top_k), hf_switch_loss(x, top_k)
    torch.testing.assert_close(got.reshape(()), want.reshape(()).float(), **tol("routing weights, fp32"),
                               msg=lambda m: f"top_k={top_k}: loss {float(got):.6g}, transformers {float(want):.6g}: {m}")


@pytest.mark.points(4)
def test_deepseek_gate_matches_transformers(tol):
    moe, params = deepseek_moe(16, 8, 3, 4, 2, 2.5, True, seed=5)
    x = torch.randn(48, 16, generator=torch.Generator().manual_seed(6))
    want_w, want_i = hf_gate(moe, x)
    assert choices_change_with_the_bias(moe, x), "test set-up: the bias must change some token's experts"
    got_w, got_i = deepseek_v3_gate(x, params["router.weight"], params["router.bias"], **GATE)
    got, want = dense_routing(got_w, got_i, 8), dense_routing(want_w, want_i, 8)
    wrong_choice = ((got > 0) != (want > 0)).any(dim=-1).nonzero().flatten().tolist()
    assert not wrong_choice, (f"tokens {wrong_choice[:5]}: experts {[sorted(got_i[t].tolist()) for t in wrong_choice[:5]]}, "
                              f"transformers chose {[sorted(want_i[t].tolist()) for t in wrong_choice[:5]]}")
    torch.testing.assert_close(got, want, **tol("routing weights, fp32"), msg=lambda m: f"gate weights: {m}")


@pytest.mark.points(4)
def test_moe_layer_matches_transformers(tol):
    moe, params = deepseek_moe(16, 8, 3, 4, 2, 2.5, True, seed=7)
    x = torch.randn(2, 10, 16, generator=torch.Generator().manual_seed(8))
    got, want = moe_forward(x, params, **GATE), hf_moe_output(moe, x)
    torch.testing.assert_close(got, want, **tol("MoE layer, fp32"), msg=lambda m: f"DeepSeek-V3 MoE output (2, 10, 16): {m}")


@pytest.mark.points(1)
@pytest.mark.parametrize("kwargs, word", [({"n_group": 3}, "groups"), ({"topk_group": 5}, "topk_group"),
                                          ({"top_k": 5, "topk_group": 2}, "top_k")])
def test_gate_refuses_an_impossible_configuration(kwargs, word):
    x, w, b = torch.randn(4, 16), torch.randn(8, 16), torch.zeros(8)
    assert deepseek_v3_gate(x, w, b, **GATE)[1].shape == (4, 3)  # the valid case
    with pytest.raises(ValueError, match=word):
        deepseek_v3_gate(x, w, b, **{**GATE, "n_group": 4, "topk_group": 2, **kwargs})
