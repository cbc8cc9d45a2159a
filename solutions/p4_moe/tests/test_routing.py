"""The EP rank's router against transformers' DeepseekV3TopkRouter with the same weights (fp32): 16
experts in 4 groups, 2 eligible, 4 a token, route scaling 2.5, a score-correction bias large enough
to change choices (it must steer the choice and stay out of the weights). Compared as dense (T, E)
matrices: the order of a token's experts does not matter."""

from __future__ import annotations

import pytest
import torch
from conftest import deepseek_moe, dense_routing, hf_router
from epmoe import MoEConfig, route

pytestmark = pytest.mark.kernels()  # torch code, no Triton kernel
GATE = {"num_experts": 16, "top_k": 4, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5, "norm_topk_prob": True}


@pytest.mark.points(3)
def test_route_matches_transformers_router(tol):
    moe, params = deepseek_moe(GATE, 16, seed=1, bias_scale=1.0)
    x = torch.randn(40, 16, generator=torch.Generator().manual_seed(2))
    got_w, got_i = route(x, params["router.weight"], params["router.bias"], MoEConfig(hidden=16, **GATE))
    want_w, want_i = hf_router(moe, x)
    got, want = dense_routing(got_w, got_i, 16), dense_routing(want_w, want_i, 16)
    wrong = ((got > 0) != (want > 0)).any(-1).nonzero().flatten().tolist()
    assert not wrong, f"tokens {wrong[:4]}: experts {[sorted(got_i[t].tolist()) for t in wrong[:4]]}, transformers chose " \
                      f"{[sorted(want_i[t].tolist()) for t in wrong[:4]]}"
    torch.testing.assert_close(got, want, **tol("routing weights, fp32"),
                               msg=lambda m: f"combine weights (the unbiased scores, renormalised, times 2.5): {m}")


def test_route_of_no_tokens_is_empty():
    _, params = deepseek_moe(GATE, 16, seed=1)
    w, i = route(torch.zeros(0, 16), params["router.weight"], params["router.bias"], MoEConfig(hidden=16, **GATE))
    assert tuple(w.shape) == (0, 4) and tuple(i.shape) == (0, 4), f"shapes {tuple(w.shape)}, {tuple(i.shape)}: want (0, 4)"
