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
    raise NotImplementedError("s14.3: seal")


def commit_checkpoint(root: str | os.PathLike, step: int, files: dict[str, bytes]) -> Path:
    """Write `files` (name -> bytes) as the checkpoint of `step`, atomically (see the module's
    docstring). A leftover temporary folder of the same step (a crash) is replaced."""
    if not files or any(n == MANIFEST or "/" in n for n in files):
        raise ValueError(f"commit_checkpoint: bad file names {sorted(files)}")
    if step_dir(root, step).exists():
        raise ValueError(f"commit_checkpoint: step {step} is already committed in {root}")
    raise NotImplementedError("s14.4: commit_checkpoint")


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
    raise NotImplementedError("s14.5: is_valid")


def latest_valid(root: str | os.PathLike) -> Path | None:
    """The committed checkpoint of the highest step under `root` that `is_valid`; None if there is
    none. Temporary folders and invalid ones are skipped (the previous valid one is used)."""
    root = Path(root)
    if not root.is_dir():
        return None
    raise NotImplementedError("s14.6: latest_valid")


def read_checkpoint(path: str | os.PathLike) -> tuple[int, dict[str, bytes]]:
    """(step, name -> bytes) of a valid checkpoint; ValueError naming the folder if it is not one."""
    path = Path(path)
    if not is_valid(path):
        raise ValueError(f"read_checkpoint: {path} is not a valid checkpoint (torn, corrupt or uncommitted)")
    manifest = _manifest(path)
    return int(manifest["step"]), {name: (path / name).read_bytes() for name in manifest["files"]}
