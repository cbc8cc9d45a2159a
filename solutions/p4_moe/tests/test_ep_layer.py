"""The EP MoE layer and DP attention on two gloo ranks against the dense MoE on one process:
transformers' DeepseekV3MoE holding the same weights (fp32; 8 experts in 4 groups, 2 eligible,
3 a token, route scaling 2.5, a bias that changes choices, one shared expert). Each rank gets only
its own tokens and only its own experts' weights. Three cases in one start of the ranks: experts
placed contiguously; 10 slots with experts 0 and 5 replicated; and the DP block (attention per
request, then the EP MoE) with rank 1 idle, holding no request, which must still join every
all-to-all."""

from __future__ import annotations

import pytest
from checks import check_moe, moe_case
from rank_programs import moe_on_rank

pytestmark = pytest.mark.kernels()  # torch code and collectives, no Triton kernel

CFG = {"hidden": 16, "num_experts": 8, "top_k": 3, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
       "norm_topk_prob": True, "num_heads": 2}
CONTIGUOUS = ((0, 1, 2, 3), (4, 5, 6, 7))
REPLICATED = ((0, 1, 2, 3, 5), (0, 4, 5, 6, 7))


@pytest.mark.points(10)
@pytest.mark.world_size(2)
def test_ep_layer_and_dp_block_equal_the_dense_moe(ranks, tol):
    built = [moe_case(CFG, CONTIGUOUS, [10, 7], seed=1),
             moe_case(CFG, REPLICATED, [6, 12], seed=2),
             moe_case(CFG, CONTIGUOUS, None, seed=3, kind="dp", lengths=[[5, 3], []])]
    names = ["contiguous experts", "experts 0 and 5 replicated", "DP block, rank 1 idle"]
    cases = [b[0] for b in built]
    results = ranks.run_each(moe_on_rank, [[b[1][r] for b in built] for r in range(2)], cases)
    for c, (case, _, want) in enumerate(built):
        check_moe([results[r][c] for r in range(2)], want, case, tol, names[c])
