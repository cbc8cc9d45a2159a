"""Dispatch and combine on four gloo ranks with rank-tagged tokens (fp32; each rank gets only its own
tokens, drawn in the judge from a secret seed). Two cases in one start of the ranks: 8 experts
placed contiguously, top-2, uneven token counts with an idle rank (0 tokens); and 6 experts on 8
slots (experts 0 and 3 replicated), top-3. Every rank's received rows, local slots and counts are
checked exactly against the order the handout defines; combine of identity experts must give back
x, and combine of rows tagged with their slot must return each row to its (token, choice)."""

from __future__ import annotations

import pytest
from checks import check_counts_first, check_dispatch, draw_dispatch, secret_generator
from rank_programs import dispatch_on_rank

pytestmark = pytest.mark.kernels()  # torch code and collectives, no Triton kernel

CASES = [
    {"num_experts": 8, "slots": ((0, 1), (2, 3), (4, 5), (6, 7)), "top_k": 2, "tokens": [5, 0, 9, 3], "width": 6},
    {"num_experts": 6, "slots": ((0, 3), (1, 0), (2, 3), (4, 5)), "top_k": 3, "tokens": [7, 4, 1, 6], "width": 3},
]


@pytest.mark.points(10)
@pytest.mark.world_size(4)
def test_dispatch_and_combine_route_every_row(ranks, tol):
    g = secret_generator()
    drawn = [draw_dispatch(case, g) for case in CASES]
    per_rank = [[d[r] for d in drawn] for r in range(4)]
    results = ranks.run_each(dispatch_on_rank, per_rank, CASES)
    for c, case in enumerate(CASES):
        res = [results[r][c] for r in range(4)]
        where = f"case {c} ({case['num_experts']} experts on slots {case['slots']}, top-{case['top_k']}, tokens {case['tokens']})"
        check_counts_first(res, where)
        check_dispatch(res, [per_rank[r][c] for r in range(4)], case, tol, where)
