"""A sharded checkpoint saved by 4 gloo ranks (ZeRO-3, Adam, lr 0.01, global batch 8) after 2 of 4
steps, loaded by 4 ranks and, resharded, by 2 (each from fresh noise weights), which train the last
2 steps. Oracle: the uninterrupted 4-rank run, which the 4-rank resume must equal bit for bit, and
one process running torch.optim.Adam on the same global batches (drawn from the seed as the
handout's next_batch draws them), which the 2-rank resume must equal within the tolerance."""

from __future__ import annotations

import pytest
from checks import check_resume, run_checkpoint


@pytest.mark.points(10)
@pytest.mark.world_size(4)
def test_checkpoint_from_four_ranks_resumes_on_four_and_on_two(ranks, tol):
    case, saved, resumed = run_checkpoint(ranks, stage=3, seed=5, sub=2)
    check_resume(case, saved, resumed, 2, tol("resumed on another world size, fp32"))
