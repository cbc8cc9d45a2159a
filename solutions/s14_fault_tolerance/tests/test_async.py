"""Asynchronous checkpointing: the package snapshots live state dicts (model.state_dict() and
optimizer.state_dict(), which alias the training tensors) at step 5 and writes them with a chunk
of a quarter of their size while training goes on; the folder appears only when the last chunk is
written, and holds the state of step 5, not a later one: the judge decodes it itself and compares
it bit for bit with its own run at step 5, and recomputes the manifest's sha256."""

from __future__ import annotations

import pytest
import torch
from checks import judge_load, judge_steps
from programs import BATCH, SAMPLES, data, fresh, judge_order, oracle, step

from autograder.testing import in_worker

SEED, AT, STEPS = 3, 5, 12


@in_worker
def train_while_writing(root: str) -> dict:
    from faulttol import AsyncCheckpointer, encode

    torch.set_num_threads(1)
    x, y = data(SEED)
    net, opt, sched = fresh(SEED)
    order, seen = judge_order(SEED, STEPS), []
    for k in range(AT):
        step(net, opt, sched, x, y, order[k])
    live = {"model": net.state_dict(), "optimizer": opt.state_dict()}
    writer = AsyncCheckpointer(root, chunk_bytes=len(encode(live)) // 4 + 1)
    writer.start(AT, {"state.pt": live})
    seen.append(("started", writer.busy))
    for k in range(AT, STEPS):
        step(net, opt, sched, x, y, order[k])  # training changes the live tensors in place
        sealed = writer.advance()
        seen.append((k + 1, sealed is not None, (root + "/step_00000005") if sealed else ""))
    return {"seen": seen, "busy": writer.busy}


@pytest.mark.points(6)
def test_checkpoint_written_while_training_holds_the_snapshot_step(tmp_path):
    torch.set_num_threads(1)
    out = train_while_writing(str(tmp_path))
    seen = out["seen"]
    assert seen[0] == ("started", True), f"busy right after start: expected True, got {seen[0]}"
    sealed_at = [s[0] for s in seen[1:] if s[1]]
    assert sealed_at == [AT + 4], (f"with a chunk of a quarter of the data the checkpoint must be sealed by the 4th "
                                   f"advance (after step {AT + 4}), once; sealed after steps {sealed_at}")
    assert not out["busy"]
    assert judge_steps(tmp_path) == {AT: True}, f"folders on disk (step -> valid by the judge): {judge_steps(tmp_path)}"
    saved, want = judge_load(tmp_path / f"step_{AT:08d}"), oracle(SEED, AT, keep=(AT,))[AT]
    for name, tensor in want["model"].items():
        assert torch.equal(saved["model"][name], tensor), (
            f"model[{name!r}] in the checkpoint of step {AT} is not the weights after step {AT} "
            f"(max diff {(saved['model'][name] - tensor).abs().max():.3g}): was it snapshotted at start?")
    for i, state in want["optimizer"].items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(saved["optimizer"]["state"][i][key], state[key]), (
                f"optimizer state {i} {key} in the checkpoint is not AdamW's after step {AT}")
