"""Atomic checkpoint files. The package commits steps 2, 4 and 6; the judge checks every folder with
its own code (manifest, sizes, sha256), then damages step 6 the way a crash or a bad disk does
(checks.CORRUPTIONS) and leaves an unrenamed temporary folder of step 8: latest_valid must fall
back to step 4 and read_checkpoint must refuse step 6 with a ValueError. A checkpoint the judge
writes itself in the handout's format must be accepted."""

from __future__ import annotations

import pytest
from checks import CORRUPTIONS, judge_commit, judge_steps

from autograder.testing import in_worker


@in_worker
def commit_steps(root: str, steps: list[int]) -> None:
    from faulttol import commit_checkpoint

    for s in steps:
        commit_checkpoint(root, s, {"state.pt": bytes(range(256)) * (s + 8), "extra.bin": b"x" * s})


@in_worker
def look(root: str, folder: str) -> dict:
    from faulttol import is_valid, latest_valid, read_checkpoint

    latest = latest_valid(root)
    try:
        read_checkpoint(folder)
        refused = ""
    except ValueError as exc:
        refused = str(exc)
    return {"latest": latest.name if latest else None, "valid": is_valid(folder), "refused": refused}


def committed(tmp_path):
    commit_steps(str(tmp_path), [2, 4, 6])
    steps = judge_steps(tmp_path)
    assert steps == {2: True, 4: True, 6: True}, f"after committing steps 2, 4, 6 the judge finds {steps} (step -> valid)"
    return tmp_path


@pytest.mark.points(1)
def test_committed_checkpoints_pass_the_judges_checksums_and_latest_is_newest(tmp_path):
    root = committed(tmp_path)
    leftovers = sorted(p.name for p in root.iterdir() if not p.name.startswith("step_"))
    assert not leftovers, f"temporary folders left after three commits: {leftovers}"
    seen = look(str(root), str(root / "step_00000006"))
    assert seen["latest"] == "step_00000006" and seen["valid"] and not seen["refused"], seen


@pytest.mark.points(1)
@pytest.mark.parametrize("damage", sorted(CORRUPTIONS))
def test_a_damaged_newest_checkpoint_is_refused_and_the_previous_one_used(tmp_path, damage):
    root = committed(tmp_path)
    CORRUPTIONS[damage](root / "step_00000006")
    seen = look(str(root), str(root / "step_00000006"))
    assert not seen["valid"], f"{damage}: is_valid accepted the damaged step 6"
    assert seen["refused"], f"{damage}: read_checkpoint read the damaged step 6 without a ValueError"
    assert seen["latest"] == "step_00000004", f"{damage}: latest_valid gave {seen['latest']}, expected step_00000004"


@pytest.mark.points(2)
def test_an_unrenamed_temporary_folder_is_not_a_checkpoint_but_the_judges_own_is(tmp_path):
    root = committed(tmp_path)
    tmp = root / ".tmp-step_00000008"  # a crash after every byte and the manifest, before the rename
    tmp.mkdir()
    for f in (root / "step_00000006").iterdir():
        (tmp / f.name).write_bytes(f.read_bytes())
    assert look(str(root), str(tmp))["latest"] == "step_00000006", "the temporary folder of step 8 was taken"
    judge_commit(root, 10, {"state.pt": b"judge" * 99})
    assert look(str(root), str(root / "step_00000010"))["latest"] == "step_00000010", (
        "a checkpoint of step 10 written by the judge in the handout's format was not accepted")
