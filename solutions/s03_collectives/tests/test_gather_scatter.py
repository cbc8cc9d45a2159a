"""Ring all-gather and reduce-scatter with blocks of uneven sizes, and pairwise all-to-all(v), on
four gloo ranks, against torch.distributed's all_gather, reduce_scatter and all_to_all_single (the
oracles, inside oracle() on every rank) and tags recomputed here: a misrouted row names its source."""

from __future__ import annotations

import pytest
from conftest import all_to_all_on_rank, check_all_to_all, check_gather_scatter, gather_scatter_on_rank

# [rows of each rank's block, width (0: 1-d)]
GATHER_CASES = [[[3, 3, 3, 3], 0], [[4, 1, 2, 6], 0], [[5, 2, 7, 3], 4], [[300, 299, 1, 250], 0]]

# splits[s][d]: rows rank s sends rank d (asymmetric: rank d receives splits[s][d], not splits[d][s])
A2A_CASES = [
    [[[2, 2, 2, 2]] * 4, 0],
    [[[1, 2, 3, 4], [5, 6, 7, 8], [2, 4, 6, 8], [3, 1, 4, 1]], 0],
    [[[3, 1, 4, 1], [5, 9, 2, 6], [5, 3, 5, 8], [9, 7, 9, 3]], 3],
]


@pytest.mark.points(4)
@pytest.mark.world_size(4)
def test_ring_all_gather_and_reduce_scatter_with_uneven_blocks(ranks):
    check_gather_scatter(ranks.run(gather_scatter_on_rank, GATHER_CASES), GATHER_CASES, "4 ranks")


@pytest.mark.points(4)
@pytest.mark.world_size(4)
def test_all_to_all_with_uneven_splits(ranks):
    check_all_to_all(ranks.run(all_to_all_on_rank, A2A_CASES), A2A_CASES, "4 ranks")
