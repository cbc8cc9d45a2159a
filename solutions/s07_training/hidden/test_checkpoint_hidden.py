"""A ZeRO-2 checkpoint saved by 2 gloo ranks after 2 of 4 steps (707 elements: 354 and 353), resumed
on 2 ranks (bit-identical to the uninterrupted run) and on one rank (its group holds everything):
stages 1 and 2 must put the loaded weights back into the module, and a shard boundary that is off
by one leaves an element nobody loads."""

from __future__ import annotations

import pytest
from checks import check_resume, run_checkpoint


@pytest.mark.points(4)
@pytest.mark.world_size(2)
def test_zero2_checkpoint_from_two_ranks_resumes_on_two_and_on_one(ranks, tol):
    case, saved, resumed = run_checkpoint(ranks, stage=2, seed=23, sub=1)
    check_resume(case, saved, resumed, 1, tol("resumed on another world size, fp32"))
