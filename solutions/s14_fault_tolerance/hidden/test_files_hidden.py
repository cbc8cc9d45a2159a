"""Corners of the checkpoint folder: steps compared as numbers, folders that are not checkpoints,
no folder at all, a stale temporary folder of the same step left by a crash (the next attempt must
not append to it), one checkpoint in flight at a time."""

from __future__ import annotations

import pytest
from checks import judge_commit, judge_steps

from autograder.testing import in_worker


@in_worker
def latest_name(root: str) -> str | None:
    from faulttol import latest_valid

    found = latest_valid(root)
    return found.name if found is not None else None


@pytest.mark.points(1)
def test_latest_is_the_highest_step_and_other_folders_are_ignored(tmp_path):
    for s in (9, 100, 10):
        judge_commit(tmp_path, s, {"state.pt": b"s" * s})
    (tmp_path / "step_latest").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "step_00000200").mkdir()  # a folder with nothing in it
    assert latest_name(str(tmp_path)) == "step_00000100"
    assert latest_name(str(tmp_path / "missing")) is None
    assert latest_name(str(tmp_path / "notes")) is None


@in_worker
def write_after_a_crash(root: str, async_writer: bool) -> None:
    from faulttol import AsyncCheckpointer, commit_checkpoint, encode

    state = {"w": list(range(300))}
    if async_writer:
        writer = AsyncCheckpointer(root, chunk_bytes=500)
        writer.start(3, {"state.pt": state})
        with pytest.raises(ValueError):
            writer.start(4, {"state.pt": state})
        writer.finish()
        writer.start(4, {"state.pt": state})
        writer.finish()
    else:
        commit_checkpoint(root, 3, {"state.pt": encode(state)})


@pytest.mark.points(1)
@pytest.mark.parametrize("async_writer", [False, True])
def test_a_stale_temporary_folder_of_the_same_step_is_replaced(tmp_path, async_writer):
    stale = tmp_path / ".tmp-step_00000003"
    stale.mkdir()
    (stale / "state.pt").write_bytes(b"half a file from the crashed attempt" * 50)
    write_after_a_crash(str(tmp_path), async_writer)
    want = {3: True, 4: True} if async_writer else {3: True}
    assert judge_steps(tmp_path) == want, f"after a crashed attempt at step 3 (judge's check): {judge_steps(tmp_path)}"
