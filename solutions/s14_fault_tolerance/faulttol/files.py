"""Checkpoint files that never load torn.

A checkpoint of step s is a folder `root/step_{s:08d}/` holding its data files and `manifest.json`:
{"step": s, "files": {name: {"bytes": size, "sha256": hex digest}}}. It is written in a temporary
folder `root/.tmp-step_{s:08d}` (every file flushed and fsync'ed, the manifest last) and renamed to
its final name in one step: a crash at any moment leaves either no folder of that name or a
complete one. The loader trusts nothing it has not checked: a folder whose manifest is missing or
unreadable, names another step, or whose files differ in size or digest is not a checkpoint.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import torch

MANIFEST = "manifest.json"
PREFIX = "step_"


def step_dir(root: str | os.PathLike, step: int) -> Path:
    """root/step_{step:08d}: where the checkpoint of `step` lives once committed."""
    if step < 0:
        raise ValueError(f"step_dir: step must be >= 0, got {step}")
    return Path(root) / f"{PREFIX}{step:08d}"


def temp_dir(root: str | os.PathLike, step: int) -> Path:
    """root/.tmp-step_{step:08d}: where the checkpoint of `step` is written before the rename."""
    return Path(root) / f".tmp-{step_dir(root, step).name}"


def encode(state: dict) -> bytes:
    """torch.save of `state` into bytes (tensors, numbers, strings, lists, tuples, dicts)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def decode(data: bytes) -> dict:
    """The state `encode` wrote (torch.load with weights_only=True: no code runs)."""
    return torch.load(io.BytesIO(data), weights_only=True)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in `path` durable (the folder's own metadata)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def seal(root: str | os.PathLike, step: int, digests: dict[str, dict]) -> Path:
    """Write the manifest (digests: name -> {"bytes", "sha256"}) into the temporary folder of
    `step`, whose data files are already written and fsync'ed, and rename the folder to its final
    name. Returns the final folder."""
    # BEGIN SOLUTION
    tmp, final = temp_dir(root, step), step_dir(root, step)
    with open(tmp / MANIFEST, "w") as f:
        json.dump({"step": step, "files": digests}, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, final)
    fsync_dir(Path(root))
    return final
    # END SOLUTION


def commit_checkpoint(root: str | os.PathLike, step: int, files: dict[str, bytes]) -> Path:
    """Write `files` (name -> bytes) as the checkpoint of `step`, atomically (see the module's
    docstring). A leftover temporary folder of the same step (a crash) is replaced."""
    if not files or any(n == MANIFEST or "/" in n for n in files):
        raise ValueError(f"commit_checkpoint: bad file names {sorted(files)}")
    if step_dir(root, step).exists():
        raise ValueError(f"commit_checkpoint: step {step} is already committed in {root}")
    # BEGIN SOLUTION
    tmp = temp_dir(root, step)
    if tmp.exists():
        for old in tmp.iterdir():
            old.unlink()
    tmp.mkdir(parents=True, exist_ok=True)
    digests = {}
    for name, data in files.items():
        with open(tmp / name, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        digests[name] = {"bytes": len(data), "sha256": sha256(data)}
    return seal(root, step, digests)
    # END SOLUTION


def _manifest(path: Path) -> dict | None:
    """The folder's manifest if it parses as one, else None."""
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return None
    return manifest


def is_valid(path: str | os.PathLike) -> bool:
    """True when `path` is a committed checkpoint: named step_{s:08d}, its manifest names step s,
    lists at least one file, and every listed file exists with the listed size and sha256."""
    path = Path(path)
    # BEGIN SOLUTION
    manifest = _manifest(path)
    if manifest is None or not manifest["files"]:
        return False
    step = manifest.get("step")
    if not isinstance(step, int) or step < 0 or path.name != f"{PREFIX}{step:08d}":
        return False
    for name, meta in manifest["files"].items():
        try:
            data = (path / name).read_bytes()
        except OSError:
            return False
        if len(data) != meta.get("bytes") or sha256(data) != meta.get("sha256"):
            return False
    return True
    # END SOLUTION


def latest_valid(root: str | os.PathLike) -> Path | None:
    """The committed checkpoint of the highest step under `root` that `is_valid`; None if there is
    none. Temporary folders and invalid ones are skipped (the previous valid one is used)."""
    root = Path(root)
    if not root.is_dir():
        return None
    # BEGIN SOLUTION
    steps = []
    for p in root.iterdir():
        if p.name.startswith(PREFIX) and p.name[len(PREFIX):].isdigit():
            steps.append(int(p.name[len(PREFIX):]))
    for step in sorted(steps, reverse=True):
        if is_valid(step_dir(root, step)):
            return step_dir(root, step)
    return None
    # END SOLUTION


def read_checkpoint(path: str | os.PathLike) -> tuple[int, dict[str, bytes]]:
    """(step, name -> bytes) of a valid checkpoint; ValueError naming the folder if it is not one."""
    path = Path(path)
    if not is_valid(path):
        raise ValueError(f"read_checkpoint: {path} is not a valid checkpoint (torn, corrupt or uncommitted)")
    manifest = _manifest(path)
    return int(manifest["step"]), {name: (path / name).read_bytes() for name in manifest["files"]}
