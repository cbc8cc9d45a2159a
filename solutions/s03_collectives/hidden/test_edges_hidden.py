"""Four ranks, degenerate sizes: no element, one element (a 0-d tensor too), fewer elements than
ranks, blocks of zero rows, all-to-all splits that are empty for some or all pairs."""

from __future__ import annotations

import pytest
from conftest import (
    all_reduce_on_rank,
    all_to_all_on_rank,
    check_all_reduce,
    check_all_to_all,
    check_gather_scatter,
    gather_scatter_on_rank,
)

TINY = [(0,), (), (1,), (3,), (4,), (5,), (2, 0)]
GATHER_CASES = [[[1, 0, 0, 0], 0], [[0, 2, 0, 1], 2], [[0, 0, 0, 3], 0], [[1, 1, 1, 0], 0]]
A2A_CASES = [
    [[[0, 0, 0, 0]] * 4, 0],                                          # nobody sends anything
    [[[0, 0, 0, 0], [1, 2, 0, 3], [2, 0, 1, 0], [0, 4, 0, 0]], 0],    # rank 0 sends nothing, rank 2 gets 1 row
    [[[3, 0, 1, 0], [2, 0, 5, 0], [0, 0, 0, 0], [1, 0, 2, 0]], 2],    # ranks 1 and 3 receive nothing
]


@pytest.mark.points(5)
@pytest.mark.world_size(4)
def test_tiny_and_empty_tensors_blocks_and_splits(ranks, tol):
    for algorithm in ("ring", "recursive_doubling"):
        check_all_reduce(ranks.run(all_reduce_on_rank, algorithm, "int", TINY), "int", TINY, tol,
                         f"{algorithm} all-reduce, int64")
    check_gather_scatter(ranks.run(gather_scatter_on_rank, GATHER_CASES), GATHER_CASES, "4 ranks, empty blocks")
    check_all_to_all(ranks.run(all_to_all_on_rank, A2A_CASES), A2A_CASES, "4 ranks, empty splits")
