"""The `perf` fixture's object: metrics a perf test records, and PNG figures it attaches.

An attachment is written here, in the judge, into the folder the trusted side named
(the run description's `attachments`, inside the run's work dir); its name and sha256 go into the test's signed
record. The submission's worker shares that folder and could rewrite the file: the trusted side
keeps it only when its bytes still hash to the signed digest. Writing never follows a link the
worker may have planted in the file's place.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Any

from autograder.protocol.attachments import DPI, MAX_PER_TEST, check_name, check_png


class Perf:
    """`perf.record("metric", value)` stores a measured value for grading; `perf.attach("name",
    figure)` keeps a matplotlib Figure (or PNG bytes) with the test's result."""

    def __init__(self, metrics: dict[str, float], attachments: list[dict[str, Any]], *, nodeid: str,
                 folder: Path | None) -> None:
        self._metrics = metrics
        self._attachments = attachments
        self._prefix = hashlib.sha256(nodeid.encode()).hexdigest()[:16]
        self._folder = folder  # None outside a graded run: attachments are checked, not kept
        self._names: set[str] = {a["name"] for a in attachments}

    def record(self, name: str, value: float) -> None:
        self._metrics[str(name)] = float(value)

    def attach(self, name: str, figure: Any) -> None:
        """Keep `figure` (a matplotlib Figure, saved as PNG at a fixed dpi, or PNG bytes) as `name`;
        ValueError for a bad name, bytes that are no PNG, a file over the cap or one too many."""
        check_name(name)
        if name in self._names:
            raise ValueError(f"perf.attach: this test already attached {name!r}")
        if len(self._names) >= MAX_PER_TEST:
            raise ValueError(f"perf.attach: at most {MAX_PER_TEST} attachments per test")
        data = check_png(png_bytes(figure))
        self._names.add(name)
        if self._folder is None:
            return
        file = f"{self._prefix}-{name}.png"
        write_new(self._folder, file, data)
        self._attachments.append({"name": name, "file": file, "sha256": hashlib.sha256(data).hexdigest()})


def png_bytes(figure: Any) -> bytes:
    """The PNG bytes of a matplotlib Figure, or the bytes given."""
    if isinstance(figure, bytes | bytearray | memoryview):
        return bytes(figure)
    from matplotlib.figure import Figure  # only here: most test runs attach nothing

    if isinstance(figure, Figure):
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=DPI)
        return buffer.getvalue()
    raise TypeError(f"perf.attach: a matplotlib Figure or PNG bytes, not {type(figure).__name__}")


def write_new(folder: Path, file: str, data: bytes) -> None:
    """Write `folder/file` as a new regular file: neither the folder nor the file may be a link."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise RuntimeError(f"perf.attach: cannot open the attachments folder {folder} ({exc})") from None
    try:
        try:
            os.unlink(file, dir_fd=dir_fd)  # removes a planted link itself, never its target
        except FileNotFoundError:
            pass
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    finally:
        os.close(dir_fd)
