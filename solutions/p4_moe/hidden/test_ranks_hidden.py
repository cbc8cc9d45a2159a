"""Three gloo ranks, one start: dispatch with a replicated expert held twice by one rank, top-4,
an idle rank, and a step where every rank is idle; the EP layer with experts placed by eplb-style
replicas through the grouped Triton GEMM (its interpreter on the CPU); the DP block with two idle
ranks, and with the requests spread unevenly (one rank three requests, one a single token). Each
rank gets only its own tokens (secret draws) and only its own experts."""

from __future__ import annotations

import pytest
from checks import check_counts_first, check_dispatch, check_moe, draw_dispatch, moe_case, secret_generator
from rank_programs import both_on_rank

pytestmark = pytest.mark.kernels()  # the grouped path launches kernels, but the layer around them is torch code

DISPATCH = [
    {"num_experts": 7, "slots": ((0, 0, 1), (2, 3, 4), (5, 6, 3)), "top_k": 4, "tokens": [0, 8, 13], "width": 5},
    {"num_experts": 6, "slots": ((0, 1), (2, 3), (4, 5)), "top_k": 2, "tokens": [0, 0, 0], "width": 4},
    {"num_experts": 6, "slots": ((0, 1), (2, 3), (4, 5)), "top_k": 1, "tokens": [3, 1, 2], "width": 2},
]
CFG = {"hidden": 12, "num_experts": 12, "top_k": 3, "n_group": 3, "topk_group": 2, "routed_scaling_factor": 1.5,
       "norm_topk_prob": False, "num_heads": 3}
EPLB = ((0, 1, 2, 3, 4), (4, 5, 6, 7, 8), (9, 10, 11, 0, 4))  # experts 0 and 4 replicated, 4 three times
CONTIGUOUS = ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11))


@pytest.mark.points(12)
@pytest.mark.world_size(3)
def test_three_ranks_replicas_idle_ranks_and_the_grouped_path(ranks, tol):
    g = secret_generator()
    drawn = [draw_dispatch(case, g) for case in DISPATCH]
    built = [moe_case(CFG, EPLB, [9, 0, 14], seed=11, grouped=True),
             moe_case(CFG, CONTIGUOUS, None, seed=12, kind="dp", lengths=[[], [6], []]),
             moe_case(CFG, EPLB, None, seed=13, kind="dp", lengths=[[4, 1, 7], [1], [2, 5]])]
    names = ["EP layer, replicas, grouped GEMM, rank 1 idle", "DP block, ranks 0 and 2 idle",
             "DP block, uneven requests"]
    mine = [([d[r] for d in drawn], [b[1][r] for b in built]) for r in range(3)]
    results = ranks.run_each(both_on_rank, mine, DISPATCH, [b[0] for b in built])
    for c, case in enumerate(DISPATCH):
        res = [results[r][0][c] for r in range(3)]
        where = f"dispatch case {c} (slots {case['slots']}, top-{case['top_k']}, tokens {case['tokens']})"
        check_counts_first(res, where)
        check_dispatch(res, [mine[r][0][c] for r in range(3)], case, tol, where)
    for c, (case, _, want) in enumerate(built):
        check_moe([results[r][1][c] for r in range(3)], want, case, tol, names[c])
