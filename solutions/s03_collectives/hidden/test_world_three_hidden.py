"""Three ranks: not a power of two, so recursive doubling must fold (rank 0 hands its vector to
rank 1, ranks 1 and 2 double, rank 1 hands the sum back), and ring blocks are uneven for most
sizes. float32 sums must also agree bit for bit on every rank (the ring sums each block once then
copies it; doubling partners add a + b and b + a, equal in IEEE arithmetic)."""

from __future__ import annotations

import pytest
from conftest import (
    all_reduce_on_rank,
    all_to_all_on_rank,
    check_all_reduce,
    check_all_to_all,
    check_gather_scatter,
    gather_scatter_on_rank,
    secret_inputs,
    sends_recorded,
    sources_of,
)

INT_SHAPES = [(1,), (2,), (3,), (4,), (1000,), (5, 7)]
FLOAT_SHAPES = [(100003,), (1,), (2,), (257, 129)]
GATHER_CASES = [[[1, 0, 2], 0], [[5, 4, 4], 3], [[100, 1, 37], 0]]
A2A_CASES = [[[[1, 2, 3], [4, 5, 6], [7, 8, 9]], 0], [[[0, 3, 1], [2, 0, 5], [1, 1, 0]], 2]]


def doubling_sends_on_rank(x) -> list:
    """[peer, elements, payload] of each message recursive doubling sends from this rank, on x (this
    rank's input, drawn by the judge and sent to this rank only)."""
    from collectives import recursive_doubling_all_reduce

    records: list = []
    with sends_recorded(records, payloads=True):
        recursive_doubling_all_reduce(x.clone())
    return records


# The fold on 3 ranks (p = 2, e = 1), in order: rank 0 hands its vector to rank 1, ranks 1 and 2
# double, then rank 1 hands the sum back to rank 0. Each message is the whole vector. (Folding the
# last two ranks instead sends the same messages per rank, in another order on rank 1.)
FOLD_SENDS = [[[1, 7]], [[2, 7], [0, 7]], [[1, 7]]]
# What each of those messages carries: the sum of these ranks' inputs.
FOLD_SOURCES = [[{0}], [{0, 1}, {0, 1, 2}], [{2}]]


@pytest.mark.points(6)
@pytest.mark.world_size(3)
def test_collectives_on_three_ranks_with_the_fold(ranks, tol):
    for algorithm in ("recursive_doubling", "ring"):
        check_all_reduce(ranks.run(all_reduce_on_rank, algorithm, "int", INT_SHAPES), "int", INT_SHAPES, tol,
                         f"{algorithm} all-reduce on 3 ranks, int64")
        check_all_reduce(ranks.run(all_reduce_on_rank, algorithm, "float", FLOAT_SHAPES), "float", FLOAT_SHAPES,
                         tol, f"{algorithm} all-reduce on 3 ranks, float32")
    check_gather_scatter(ranks.run(gather_scatter_on_rank, GATHER_CASES), GATHER_CASES, "3 ranks")
    check_all_to_all(ranks.run(all_to_all_on_rank, A2A_CASES), A2A_CASES, "3 ranks")
    inputs = secret_inputs(3, [7] * 3)
    for rank, records in enumerate(ranks.run_each(doubling_sends_on_rank, inputs)):
        sent = [[peer, numel] for peer, numel, _ in records]
        assert sent == FOLD_SENDS[rank], (
            f"recursive_doubling_all_reduce on 3 ranks, rank {rank}: sent {sent} ([peer, elements], in order); the "
            f"fold folds the first 2e ranks (even into odd) and doubles over the rest: expected {FOLD_SENDS[rank]}")
        carried = [None if (d := sources_of(payload, inputs, [7])) is None else d[1] for _, _, payload in records]
        assert sorted(map(sorted, filter(None, carried))) == sorted(map(sorted, FOLD_SOURCES[rank])) \
            and None not in carried, (
            f"recursive_doubling_all_reduce on 3 ranks, rank {rank}: its messages carried the sums of the inputs of "
            f"ranks {carried} (None: no sum of inputs); expected {FOLD_SOURCES[rank]}")
