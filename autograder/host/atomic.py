"""Atomic file writes: a reader sees the old file or the new one, never a half-written one.

A results file is what a grader's caller acts on (a loop that skips students who already have one,
an LMS import): written to a temporary file in the same folder, flushed to disk, then renamed over
the target, so a kill at any moment leaves either no file or a complete one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

TEMP_PREFIX = ".partial-"  # what a killed writer may leave behind; `remove_partials` clears them


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (same-folder temp file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a results file is as readable as a plain write makes it
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode())


def remove_partials(folder: Path) -> int:
    """Delete the temp files a killed writer left in `folder`; how many there were."""
    stale = list(folder.glob(f"{TEMP_PREFIX}*")) if folder.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    return len(stale)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (a crash right after must not bring the old name back)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
