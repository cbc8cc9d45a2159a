"""A run killed (SIGKILL of its process, by the test's fault hook, after a backward and before the
update) at a step the judge draws, then resumed by a fresh process from the latest valid
checkpoint, must end bit-identical (torch.equal) to the uninterrupted run the judge computes in
its own process. Checkpoints are taken every 4 steps with AsyncCheckpointer, each written over about
three steps, so the kill may land while one is being written; the judge reads the folder itself
(manifests, sizes, sha256) and knows which checkpoint the resume must start from. The resumed
process seeds its generators with other values before loading: only a full restore (weights,
AdamW, LambdaLR, both generators, the loader's position) gives the same bits."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import torch
from checks import assert_params_equal, judge_steps
from programs import BATCH, SAMPLES, data, fresh, oracle, step

from autograder.testing import in_worker

SEED, STEPS, EVERY, CHUNK = 11, 20, 4, 6000


@in_worker
def run_program(root: str, seed: int, steps: int, every: int, chunk: int, kill_at: int, restart_seed: int) -> dict:
    """Train to `steps`, resuming from the latest valid checkpoint under root if there is one
    (after seeding everything with restart_seed, as a new process would be); an async checkpoint
    every `every` steps (advanced once a step); die during step `kill_at`."""
    from faulttol import (AsyncCheckpointer, ResumableLoader, capture_training_state, decode, latest_valid,
                          read_checkpoint, restore_training_state)

    torch.set_num_threads(1)
    x, y = data(seed)
    loader = ResumableLoader(SAMPLES, BATCH, seed)
    path = latest_valid(root)
    if path is None:
        net, opt, sched = fresh(seed)
        done = 0
    else:
        net, opt, sched = fresh(restart_seed)
        done = restore_training_state(decode(read_checkpoint(path)[1]["state.pt"]), net, opt, sched, loader)
    start, writer = done, AsyncCheckpointer(root, chunk)
    while done < steps:
        step(net, opt, sched, x, y, loader.next_indices(), kill=done + 1 == kill_at)
        done += 1
        writer.advance()
        if done % every == 0 and done < steps:
            writer.finish()
            writer.start(done, {"state.pt": capture_training_state(net, opt, sched, loader, done)})
    writer.finish()
    return {"resumed_from": start, "final": [p.detach().clone() for p in net.parameters()]}


def kill_and_resume(root: Path, kill_at: int) -> tuple[dict, dict[int, bool]]:
    with pytest.raises(BaseException) as died:  # the fault hook's SIGKILL ends the process mid-call
        run_program(str(root), SEED, STEPS, EVERY, CHUNK, kill_at, secrets.randbelow(10**6) + 100)
    assert "SIGKILL" in str(died.value) or "killed" in str(died.value), (
        f"the run armed to die at step {kill_at} did not die: {died.value!r}")
    on_disk = judge_steps(root)
    resumed = run_program(str(root), SEED, STEPS, EVERY, CHUNK, 0, secrets.randbelow(10**6) + 100)
    return resumed, on_disk


@pytest.mark.points(10)
def test_run_killed_mid_step_resumes_bit_identical(tmp_path):
    torch.set_num_threads(1)
    kill_at = 9 + secrets.randbelow(STEPS - 11)  # 9..17: at least one checkpoint sealed before
    resumed, on_disk = kill_and_resume(tmp_path, kill_at)
    valid = [s for s, ok in on_disk.items() if ok]
    assert valid, f"killed at step {kill_at}: no valid checkpoint on disk (judge's check): {on_disk}"
    assert all(ok for ok in on_disk.values()), f"killed at step {kill_at}: a committed folder fails the judge's check: {on_disk}"
    assert resumed["resumed_from"] == max(valid), (
        f"killed at step {kill_at}: resumed from step {resumed['resumed_from']}, the latest valid checkpoint is "
        f"step {max(valid)} (folders on disk: {sorted(on_disk)})")
    assert_params_equal(resumed["final"], oracle(SEED, STEPS)["final"],
                        f"killed at step {kill_at}, resumed from step {max(valid)}, after step {STEPS}")
