"""The data position: every rank draws the same global batch from the loop's generator and takes
its own contiguous slice, so the ranks' slices in rank order are the batch one rank draws from the
same state (a strided split, DistributedSampler's, trains the same average but hands each rank
other rows, and a checkpoint resumed on another world size then sees other data)."""

from __future__ import annotations

import pytest
import torch
from trainfw import LoopState, next_batch


@pytest.mark.points(2)
def test_each_rank_takes_its_contiguous_slice_of_one_global_batch():
    x, y = torch.arange(40.0).reshape(20, 2), torch.arange(20)
    for world in (2, 4):
        for step in range(2):  # the second draw too: the state advanced the same way
            one, parts = LoopState.start(7), [LoopState.start(7) for _ in range(world)]
            for _ in range(step):
                next_batch(one, x, y, global_batch=8, rank=0, world=1)
                for r, loop in enumerate(parts):
                    next_batch(loop, x, y, global_batch=8, rank=r, world=world)
            whole = next_batch(one, x, y, global_batch=8, rank=0, world=1)[1].tolist()
            split = [next_batch(loop, x, y, global_batch=8, rank=r, world=world)[1].tolist()
                     for r, loop in enumerate(parts)]
            assert [row for part in split for row in part] == whole, (
                f"world {world}, draw {step + 1}: the ranks' rows {split} in rank order should be the "
                f"global batch {whole} cut into {world} contiguous slices of {8 // world}")
