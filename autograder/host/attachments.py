"""Attachments: the PNGs perf tests attach, from the judge's signed record to the results folder.

The judge writes each one into the run's attachments folder (inside the work dir, which the sandbox
mounts writable) and signs its name and sha256. The submission's worker runs in the same sandbox
as the same user and can rewrite, remove or replace that file, so after the run the trusted side
reads it once (never through a link, never more than the cap), keeps the bytes only when they hash
to the signed digest, and otherwise gives the test's result a note. An attachment never changes a
test's status: it is evidence to look at, not a grade.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import re
import stat
from pathlib import Path
from typing import NamedTuple

from autograder.host import atomic
from autograder.host.results import AssignmentResult, Attachment, TestResult
from autograder.protocol.attachments import FILE, MAX_BYTES, NAME, PNG_SIGNATURE

SHA256 = re.compile(r"[0-9a-f]{64}")
NOT_SAVED = "verified, not saved (`autograder grade --json/--markdown` saves figures beside its reports)"


def from_record(entries: object) -> list[Attachment]:
    """The attachments a signed test record lists; an entry of the wrong shape becomes a problem."""
    out = []
    for entry in entries if isinstance(entries, list) else []:
        name, file, digest = (str(entry.get(k, "")) if isinstance(entry, dict) else "" for k in ("name", "file", "sha256"))
        if NAME.fullmatch(name) and FILE.fullmatch(file) and SHA256.fullmatch(digest):
            out.append(Attachment(name, digest, file))
        else:
            out.append(Attachment(name[:40] or "?", digest, "", problem="not kept: malformed entry in the signed record"))
    return out


def verify(results: list[TestResult], folder: Path) -> list[str]:
    """Keep the bytes of each attachment whose file in `folder` hashes to its signed digest; a note
    (on the attachment, and one returned for the assignment) for each one that does not."""
    notes = []
    for result in results:
        for attachment in result.attachments:
            if not attachment.problem:
                _keep_if_signed(attachment, folder)
            if attachment.problem:
                notes.append(f"{result.test.nodeid}: attachment {attachment.name!r} {attachment.problem}")
    return notes


def _keep_if_signed(attachment: Attachment, folder: Path) -> None:
    try:
        data = _read(folder, attachment.file)
    except _Unreadable as exc:
        attachment.problem = f"not kept: {exc}"
        return
    if hmac.compare_digest(hashlib.sha256(data).hexdigest(), attachment.sha256):
        attachment.data = data  # the bytes hashed, not the file: it may change again after this read
    else:
        attachment.problem = ("not kept: its bytes changed after the judge wrote them (the submission's "
                              "process shares that folder): forged or overwritten")


class _Unreadable(Exception):
    pass


def _read(folder: Path, file: str) -> bytes:
    """The bytes of `folder/file`, read once; neither may be a link, the file must be regular (a
    FIFO would block) and no larger than the cap."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise _Unreadable("the attachments folder is gone or was replaced") from None
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        raise _Unreadable("the judge's file was removed after it was written") from None
    except OSError as exc:
        why = "replaced by a link" if exc.errno == errno.ELOOP else f"unreadable ({exc.strerror})"
        raise _Unreadable(f"the judge's file was {why}") from None
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise _Unreadable("the judge's file was replaced by something that is not a file")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES or not data.startswith(PNG_SIGNATURE):
        raise _Unreadable("the judge's file was rewritten (no PNG of at most the cap's size)")
    return data


def figures_dir(*report_paths: str | None) -> Path | None:
    """Where figures go: `figures/` beside the first report file asked for (None: none asked)."""
    first = next((p for p in report_paths if p), None)
    return Path(first).parent / "figures" if first else None


def slug(nodeid: str) -> str:
    """A file name for a test id: hidden/test_x.py::test_y[a-b] -> hidden.test_x.test_y-a-b."""
    text = nodeid.replace(".py::", ".").replace("::", ".").replace("/", ".")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:120] or "test"


def save(result: AssignmentResult, root: Path | None) -> None:
    """Write the verified attachments to root/<assignment>/<test>--<name>.png and note their paths;
    the PNGs of an earlier grading of the assignment go first (a stale figure would mislead). A
    figure that cannot be written is noted, never an error: the grade must still reach its reports."""
    if root is None:
        return  # no report file was asked for: the listing says how to keep the figures
    folder = root / result.id
    for stale in folder.glob("*.png") if folder.is_dir() else []:
        with contextlib.suppress(OSError):
            stale.unlink()
    used: set[Path] = set()
    for test, attachment in [(t, a) for t in result.tests for a in t.attachments if a.data is not None]:
        stem = f"{slug(test.test.nodeid)}--{attachment.name}"
        path, n = folder / f"{stem}.png", 1
        while path in used:  # two test ids that differ only in characters a file name cannot hold
            n += 1
            path = folder / f"{stem}-{n}.png"
        used.add(path)
        try:
            atomic.write_bytes(path, attachment.data or b"")
            attachment.path = str(path)
        except OSError as exc:
            attachment.problem = f"not saved: {exc}"
            result.notes.append(f"{test.test.nodeid}: attachment {attachment.name!r} {attachment.problem}")


class Listed(NamedTuple):
    nodeid: str
    name: str
    path: str     # where it was saved, relative to the listing's base ("" when not saved)
    problem: str  # why it was not kept ("" when its bytes matched; then the notes say nothing of it)

    @property
    def where(self) -> str:
        return self.path or self.problem or NOT_SAVED


def listing(result: AssignmentResult, base: Path | None = None) -> list[Listed]:
    """Every attachment of the result's tests, paths relative to `base`."""
    return [Listed(test.test.nodeid, a.name, (os.path.relpath(a.path, base) if base else a.path) if a.path else "",
                   a.problem)
            for test in result.tests for a in test.attachments]


def output_lines(attachments: list[Attachment]) -> list[str]:
    """One line per attachment for a test's own output (what Gradescope shows under the test)."""
    return [f"figure {a.name}: {a.path or a.problem or NOT_SAVED}" for a in attachments]


def as_json(attachments: list[Attachment]) -> list[dict[str, str]]:
    return [{"name": a.name, "sha256": a.sha256, "path": a.path, "problem": a.problem} for a in attachments]
