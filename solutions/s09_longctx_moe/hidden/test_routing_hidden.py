"""More routing cases against transformers: a gate whose group choice differs between "sum of each
group's top two" and "each group's best expert"; other group shapes, no renormalisation, a
stronger bias; an MoE layer without shared experts; Switch's loss at k = 3 and on a collapsed
router; blocks merged when neither block has a visible key."""

from __future__ import annotations

import pytest
import torch
from conftest import (choices_change_with_the_bias, deepseek_moe, dense_routing, hf_gate, hf_moe_output,
                      hf_switch_loss, sdpa_reference)

from longmoe import block_attention, deepseek_v3_gate, merge_attention, moe_forward, switch_load_balancing_loss


def check_gate(moe, params: dict, x: torch.Tensor, gate: dict, tol: dict, what: str) -> None:
    want_w, want_i = hf_gate(moe, x)
    got_w, got_i = deepseek_v3_gate(x, params["router.weight"], params["router.bias"], **gate)
    e = params["router.weight"].shape[0]
    got, want = dense_routing(got_w, got_i, e), dense_routing(want_w, want_i, e)
    wrong = ((got > 0) != (want > 0)).any(dim=-1).nonzero().flatten().tolist()
    assert not wrong, (f"{what}: tokens {wrong[:4]} routed to {[sorted(got_i[t].tolist()) for t in wrong[:4]]}, "
                       f"transformers: {[sorted(want_i[t].tolist()) for t in wrong[:4]]}")
    torch.testing.assert_close(got, want, **tol, msg=lambda m: f"{what}: gate weights: {m}")


@pytest.mark.points(2)
def test_group_score_is_the_sum_of_its_top_two(tol):
    # Two groups of four; weight 0 makes every affinity 0.5, so the choice scores are 0.5 + bias:
    # group 0 = [0.9, 0.1, 0.1, 0.1] (best 0.9, top-2 sum 1.0), group 1 = [0.6, 0.6, 0.1, 0.1] (1.2).
    moe, params = deepseek_moe(8, 8, 2, 2, 1, 1.0, True, seed=9)
    bias = torch.tensor([0.4, -0.4, -0.4, -0.4, 0.1, 0.1, -0.4, -0.4])
    with torch.no_grad():
        moe.gate.weight.zero_()
        moe.gate.e_score_correction_bias.copy_(bias)
    params.update({"router.weight": torch.zeros(8, 8), "router.bias": bias})
    x = torch.randn(3, 8)
    check_gate(moe, params, x, {"top_k": 2, "n_group": 2, "topk_group": 1}, tol("routing weights, fp32"),
               "group 1 wins by its top-2 sum 1.2 over group 0's 1.0 (group 0 has the best single expert)")


GATES = {
    "one group, top-2, weights not renormalised": {"experts": 8, "top_k": 2, "n_group": 1, "topk_group": 1, "scaling": 1.0, "norm": False},
    "16 experts in 8 groups, 3 eligible, top-4, scale 2.827": {"experts": 16, "top_k": 4, "n_group": 8, "topk_group": 3,
                                                                    "scaling": 2.827, "norm": True},
    "8 experts in 2 groups, 1 eligible, top-4 (the whole group), not renormalised": {
        "experts": 8, "top_k": 4, "n_group": 2, "topk_group": 1, "scaling": 1.5, "norm": False},
}


@pytest.mark.points(2)
@pytest.mark.parametrize("name", sorted(GATES))
def test_gate_variants_match_transformers(name, tol):
    g = GATES[name]
    moe, params = deepseek_moe(12, g["experts"], g["top_k"], g["n_group"], g["topk_group"], g["scaling"], g["norm"],
                               seed=10, bias_scale=1.0)
    x = torch.randn(64, 12, generator=torch.Generator().manual_seed(11))
    assert choices_change_with_the_bias(moe, x), "test set-up: the bias must change some token's experts"
    gate = {"top_k": g["top_k"], "n_group": g["n_group"], "topk_group": g["topk_group"],
                "routed_scaling_factor": g["scaling"], "norm_topk_prob": g["norm"]}
    check_gate(moe, params, x, gate, tol("routing weights, fp32"), name)


@pytest.mark.points(2)
def test_moe_layer_without_shared_experts(tol):
    moe, params = deepseek_moe(16, 16, 2, 4, 2, 1.0, False, seed=12, shared=0)
    x = torch.randn(3, 7, 16, generator=torch.Generator().manual_seed(13))
    got = moe_forward(x, params, top_k=2, n_group=4, topk_group=2, routed_scaling_factor=1.0, norm_topk_prob=False)
    torch.testing.assert_close(got, hf_moe_output(moe, x, shared=False), **tol("MoE layer, fp32"),
                               msg=lambda m: f"routed experts only (no shared.* params), 16 experts, top-2: {m}")


@pytest.mark.points(1)
@pytest.mark.parametrize("case", ["k=3", "collapsed"])
def test_switch_loss_more_cases(case, tol):
    g = torch.Generator().manual_seed(14)
    if case == "k=3":
        x, k = torch.randn(50, 6, generator=g) * 3, 3
    else:  # every token prefers experts 0 and 1: the loss approaches E = 8
        x, k = torch.cat([torch.full((32, 2), 12.0), torch.zeros(32, 6)], dim=1) + 0.01 * torch.randn(32, 8, generator=g), 2
    got, want = switch_load_balancing_loss(x, k), hf_switch_loss(x, k)
    torch.testing.assert_close(got.reshape(()), want.reshape(()).float(), **tol("routing weights, fp32"),
                               msg=lambda m: f"{case}: loss {float(got):.6g}, transformers {float(want):.6g}: {m}")


@pytest.mark.points(2)
def test_merge_of_two_empty_blocks_stays_empty(tol):
    g = torch.Generator().manual_seed(15)
    q, k, v = (torch.randn(1, 2, 12, 8, generator=g) for _ in range(3))
    pos = torch.arange(12)
    out = lse = None
    for b in (torch.arange(8, 12), torch.arange(4, 8), torch.arange(0, 4)):  # rows 0..3 see nothing in two blocks
        part, part_lse = block_attention(q, k[:, :, b], v[:, :, b], pos, b, causal=True, window=6)
        out, lse = (part, part_lse) if out is None else merge_attention(out, lse, part, part_lse)
    assert torch.isfinite(out).all(), "a merge of two blocks that both have lse = -inf must give 0 and -inf, not NaN"
    torch.testing.assert_close(out, sdpa_reference(q, k, v, True, 6), **tol("attention, fp32"),
                               msg=lambda m: f"three blocks, window 6, the later blocks first: {m}")
