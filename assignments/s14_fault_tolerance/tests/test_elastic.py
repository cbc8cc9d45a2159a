"""Elastic restart on 3 gloo ranks. Phase one: the ranks train 9 data-parallel steps (global batch
6, AdamW, LambdaLR), each committing its full state every 4 steps in its own folder; every rank's
compute lasts at least 20 ms, and one rank, drawn by the judge and told to no other, 60 ms more:
every rank must name it from the gathered step times. The judge then evicts it (the node is
replaced), checks every checkpoint folder itself and tears the newest checkpoint (step 8) of one
survivor. Phase two: the
two survivors form a new group, agree on the step to resume from (4: the latest valid on both),
load it and train to step 12. Oracle: one process training on the same global batches; every
step from 5 to 12 must run exactly once after the resume."""

from __future__ import annotations

import secrets

import pytest
import torch
from checks import flip_byte, judge_steps
from programs import oracle
from rank_programs import resume_on_survivors, train_and_checkpoint

from autograder.worker.ranks import private_folder

SEED, BEFORE, EVERY, TOTAL = 7, 9, 4, 12


@pytest.mark.points(10)
@pytest.mark.world_size(3)
def test_straggler_is_named_and_survivors_resume_from_the_common_valid_checkpoint(ranks, tol):
    torch.set_num_threads(1)
    slow = secrets.randbelow(3)
    first = ranks.run_each(train_and_checkpoint, [r == slow for r in range(3)], SEED, BEFORE, EVERY)
    for rank, out in enumerate(first):
        assert out["stragglers"] == [slow], (f"rank {slow} was slowed by 60 ms a step; rank {rank} named "
                                             f"{out['stragglers']} (its gathered times, first step: {out['times'][0]})")
    roots = [private_folder(ranks.folder, r) / "tmp" / "ckpt" for r in range(3)]
    for rank, root in enumerate(roots):
        assert judge_steps(root) == {4: True, 8: True}, f"rank {rank}'s checkpoints (step -> valid by the judge): {judge_steps(root)}"
    survivors = [r for r in range(3) if r != slow]
    flip_byte(roots[survivors[0]] / "step_00000008" / "state.pt", 1234)  # a torn write on one survivor
    second = ranks.run(resume_on_survivors, survivors, SEED, TOTAL)
    want = oracle(SEED, TOTAL, dropout=0.0)["final"]
    for rank in survivors:
        out = second[rank]
        assert out["resume"] == 4, (f"rank {rank} resumed from step {out['resume']}: step 8 is torn on rank "
                                    f"{survivors[0]}, so 4 is the latest step valid on both survivors")
        assert out["ran"] == list(range(5, TOTAL + 1)), f"rank {rank} ran steps {out['ran']} after the resume"
        for i, (got, w) in enumerate(zip(out["final"], want)):
            torch.testing.assert_close(got, w, **tol("resumed on fewer ranks, fp32"), msg=lambda m: (
                f"rank {rank} after resuming on 2 ranks, parameter {i} against one process: {m}"))
