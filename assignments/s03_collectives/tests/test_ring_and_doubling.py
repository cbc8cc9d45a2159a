"""Ring and recursive-doubling all-reduce on gloo ranks, against torch.distributed.all_reduce (the
oracle, inside oracle() on every rank) and the exact sum of rank-tagged integers: rank r holds
x[i] = i * 100000 + 10**r, so a wrong element says which ranks' elements went into it."""

from __future__ import annotations

import pytest
from conftest import all_reduce_on_rank, check_all_reduce

# Sizes that divide by the world, that do not, smaller than the world, and 2-d.
INT_SHAPES_2 = [(1,), (2,), (7,), (1000,), (3, 5)]
INT_SHAPES_4 = [(1,), (3,), (4,), (5,), (1001,), (16, 33)]
FLOAT_SHAPES = [(4097,), (64, 65)]


@pytest.mark.points(3)
@pytest.mark.world_size(2)
def test_ring_all_reduce_sums_in_place_on_two_ranks(ranks, tol):
    check_all_reduce(ranks.run(all_reduce_on_rank, "ring", "int", INT_SHAPES_2), "int", INT_SHAPES_2, tol,
                     "ring_all_reduce, int64")
    check_all_reduce(ranks.run(all_reduce_on_rank, "ring", "float", FLOAT_SHAPES), "float", FLOAT_SHAPES, tol,
                     "ring_all_reduce, float32")


@pytest.mark.points(4)
@pytest.mark.world_size(4)
def test_ring_all_reduce_on_four_ranks_with_uneven_chunks(ranks, tol):
    check_all_reduce(ranks.run(all_reduce_on_rank, "ring", "int", INT_SHAPES_4), "int", INT_SHAPES_4, tol,
                     "ring_all_reduce, int64")
    check_all_reduce(ranks.run(all_reduce_on_rank, "ring", "float", FLOAT_SHAPES), "float", FLOAT_SHAPES, tol,
                     "ring_all_reduce, float32")


@pytest.mark.points(4)
@pytest.mark.world_size(4)
def test_recursive_doubling_all_reduce_on_four_ranks(ranks, tol):
    check_all_reduce(ranks.run(all_reduce_on_rank, "recursive_doubling", "int", INT_SHAPES_4), "int",
                     INT_SHAPES_4, tol, "recursive_doubling_all_reduce, int64")
    check_all_reduce(ranks.run(all_reduce_on_rank, "recursive_doubling", "float", FLOAT_SHAPES), "float",
                     FLOAT_SHAPES, tol, "recursive_doubling_all_reduce, float32")
