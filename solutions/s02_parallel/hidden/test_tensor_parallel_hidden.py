"""Tensor parallelism on four gloo ranks: the whole world as one group with an uneven vocabulary
(10 ids: 3, 3, 2, 2), two groups of two, [0, 2] and [1, 3] (a rank's place in its group is
neither its global rank nor that modulo the group size; 7 ids: 4, 3),
and four groups of one (no split at all); plus the refusals. Oracle: one process in fp32
(rank_programs.expected)."""

from __future__ import annotations

import pytest
import torch
from parallel import shard_range
from rank_programs import check_ranks, make_case, run_tp


def refusals_on_rank() -> dict[str, bool]:
    """Layers that must refuse: out or in features not divisible by the group, logits of the wrong width."""
    from parallel import ColumnParallelLinear, RowParallelLinear, vocab_parallel_cross_entropy

    out = {}
    for name, make in (("column 6 over 4", lambda: ColumnParallelLinear(torch.ones(6, 4))),
                       ("row 6 over 4", lambda: RowParallelLinear(torch.ones(4, 6))),
                       ("logits of 5 columns for a vocabulary of 10 over 4 ranks (3, 3, 2, 2)",
                        lambda: vocab_parallel_cross_entropy(torch.zeros(2, 5), torch.zeros(2, dtype=torch.long),
                                                             vocab_size=10))):
        try:
            make()
            out[name] = False
        except ValueError:
            out[name] = True
    return out


@pytest.mark.points(8)
@pytest.mark.world_size(4)
def test_tensor_parallel_layers_on_four_ranks_in_one_two_and_four_groups(ranks, tol):
    t = make_case(vocab=10)
    check_ranks(run_tp(ranks, t, None, 4, lambda rank: rank), t, 4, lambda rank: rank, tol)
    t = make_case(vocab=7, tokens=(2, 3))
    check_ranks(run_tp(ranks, t, [[0, 2], [1, 3]], 2, lambda rank: rank // 2), t, 2, lambda rank: rank // 2, tol)
    t = make_case(vocab=5, tokens=(4,))
    check_ranks(run_tp(ranks, t, [[0], [1], [2], [3]], 1, lambda rank: 0), t, 1, lambda rank: 0, tol)
    for rank, refused in enumerate(ranks.run(refusals_on_rank)):
        assert all(refused.values()), f"rank {rank} accepted: {[k for k, v in refused.items() if not v]}"


@pytest.mark.points(1)
def test_shard_range_edge_cases():
    assert [tuple(shard_range(2, r, 4)) for r in range(4)] == [(0, 1), (1, 2), (2, 2), (2, 2)]
    assert tuple(shard_range(0, 0, 1)) == (0, 0)
    assert tuple(shard_range(128256, 7, 8)) == (7 * 16032, 128256)
    for bad in ((10, 4, 4), (10, -1, 4), (10, 0, 0)):
        with pytest.raises(ValueError):
            shard_range(*bad)
