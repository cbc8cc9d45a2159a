"""Corners of the checkpoint folder: steps compared as numbers, folders that are not checkpoints,
no folder at all, a stale temporary folder of the same step left by a crash (the next attempt must
not append to it), one checkpoint in flight at a time."""

from __future__ import annotations

from pathlib import Path

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


@in_worker
def seal_then_one_that_fails_in_the_manifest(root: str) -> tuple[bool, list[str]]:
    """Step 6 sealed normally (is it a valid checkpoint?), then a temporary folder of step 7 sealed
    with a digest that cannot be written as JSON: the manifest's write fails part-way, as a crash
    there would. (step 6 valid, the folders left after)."""
    from faulttol import files

    for step, digest in ((6, files.sha256(b"abc")), (7, object())):
        tmp = files.temp_dir(root, step)
        tmp.mkdir(parents=True)
        (tmp / "state.pt").write_bytes(b"abc")
        try:
            files.seal(root, step, {"state.pt": {"bytes": 3, "sha256": digest}})
        except Exception:  # noqa: BLE001  step 7's failed write is the point
            if step == 6:
                raise
    return files.is_valid(files.step_dir(root, 6)), sorted(p.name for p in Path(root).iterdir())


@pytest.mark.points(1)
def test_a_seal_that_fails_while_writing_the_manifest_leaves_no_step_folder(tmp_path):
    """The manifest is written in the temporary folder before the rename: a failure there leaves
    `.tmp-step_00000007` (replaced by the next attempt), never `step_00000007` without a manifest.
    A seal that works must give a valid checkpoint first (step 6)."""
    valid, left = seal_then_one_that_fails_in_the_manifest(str(tmp_path))
    assert valid and "step_00000006" in left, f"a normal seal of step 6 left {left} (valid: {valid})"
    assert "step_00000007" not in left, f"a failed manifest write left {left}: the folder was renamed before its manifest was complete"


@in_worker
def validity_of_an_empty_manifest(root: str) -> bool:
    from faulttol import files

    folder = files.step_dir(root, 3)
    folder.mkdir(parents=True)
    (folder / files.MANIFEST).write_text('{"step": 3, "files": {}}')
    return files.is_valid(folder)


@pytest.mark.points(1)
def test_a_manifest_that_lists_no_file_is_not_a_checkpoint(tmp_path):
    """The handout's rule: a manifest must list at least one file (an empty folder with a manifest
    written before its data is no checkpoint)."""
    assert validity_of_an_empty_manifest(str(tmp_path)) is False, "step_00000003 with a manifest listing no file was accepted"


@in_worker
def advances_to_seal(root: str, sizes: list[int], chunk: int) -> tuple[int, int]:
    """Calls of `advance` until a checkpoint of len(sizes) files (each a state of one uint8 tensor of
    that many bytes; encoded larger by torch.save's framing) is sealed, with the encoded sizes."""
    import torch
    from faulttol import AsyncCheckpointer, files

    states = {f"part{i}.pt": {"x": torch.zeros(n, dtype=torch.uint8)} for i, n in enumerate(sizes)}
    total = sum(len(files.encode(s)) for s in states.values())
    writer = AsyncCheckpointer(root, chunk_bytes=chunk)
    writer.start(1, states)
    calls = 0
    while writer.busy:
        writer.advance()
        calls += 1
    return calls, total


@pytest.mark.points(1)
def test_an_advance_writes_at_most_chunk_bytes_over_all_files(tmp_path):
    """Three files: each advance writes up to chunk_bytes in all (not per file), so sealing takes
    ceil(total / chunk_bytes) advances."""
    calls, total = advances_to_seal(str(tmp_path), [3000, 5000, 4000], 4096)
    want = -(-total // 4096)
    assert calls == want, f"{total} bytes in 3 files with chunk_bytes 4096 sealed after {calls} advances, expected {want}"
