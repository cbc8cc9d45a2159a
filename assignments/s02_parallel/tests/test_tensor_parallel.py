"""Tensor-parallel layers on gloo ranks against one process in fp32: column- and row-parallel linear,
an MLP block (column -> GELU -> row), the vocabulary-parallel embedding and cross-entropy, forward
and backward. Every rank gets full-size weights and the whole inputs; the test slices the expected
shards with torch.tensor_split (its own convention, as the handout states it). Only the rank's own
shard of each weight (and of the logits) is real, the other shards are noise, all drawn from a
seed no rank sees: a layer uses its own shard only, and what it needs from the others' comes in
the collectives.

Collectives are counted per phase inside each rank (conftest.counting_collectives), and each one
must carry this rank's own part (its partial sum, its shard of the output, its row maxima and
sums for the loss), checked against the judge's computation (crossed.py): data of the right size
that carries anything else fails.
"""

from __future__ import annotations

import pytest
import torch
from parallel import shard_range
from rank_programs import check_ranks, make_case, run_tp


@pytest.mark.points(2)
def test_shard_range_splits_like_tensor_split():
    for size in range(13):
        for world in range(1, 6):
            lens = [len(c) for c in torch.tensor_split(torch.arange(size), world)]
            want = [(sum(lens[:r]), sum(lens[: r + 1])) for r in range(world)]
            assert [tuple(shard_range(size, r, world)) for r in range(world)] == want, f"{size} items over {world}"


@pytest.mark.points(10)
@pytest.mark.world_size(2)
def test_tensor_parallel_layers_equal_one_process_on_two_ranks(ranks, tol):
    t = make_case(vocab=11)  # 11 ids over 2 ranks: 6 and 5
    results = run_tp(ranks, t, None, 2, lambda rank: rank)
    check_ranks(results, t, 2, lambda rank: rank, tol)
