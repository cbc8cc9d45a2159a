"""Find each student's submission in a class folder, and the package inside it at any depth.

A class folder holds one entry per student: a folder or an archive (.zip, .tar, .tar.gz, .tgz,
.tar.bz2, .tar.xz), named after the student. Inside, the package (`<package>/__init__.py`) may sit
at any depth (`dave/s05_kvcache/kvcache/`); the folder holding it is what gets graded. No package,
two packages, an archive that does not open, or two entries for one student are reported with
the reason, never guessed at. Archives are unpacked with no member outside the target (no absolute
path, no `..`, no link), within size limits.
"""

from __future__ import annotations

import re
import shutil
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from autograder.host.submission import find_roots

ARCHIVE_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".txz", ".tar", ".zip")
MAX_UNPACKED_BYTES = 512 * 1024 * 1024  # a course package is kilobytes; more is a mistake or a bomb
MAX_MEMBERS = 20_000

# why an entry is not graded (the gradebook's status for it)
BROKEN_ARCHIVE, AMBIGUOUS, NO_PACKAGE = "broken_archive", "ambiguous", "no_package"


class UnpackError(Exception):
    """An archive that cannot be unpacked safely."""


@dataclass(frozen=True)
class Entry:
    """One student's submission as it lies in the class folder."""

    student: str
    path: Path  # a folder or an archive

    @property
    def archive(self) -> bool:
        return self.path.is_file()


@dataclass(frozen=True)
class Located:
    """Where an entry's package is (`root`: the folder holding it), or why it is not gradable."""

    entry: Entry
    root: Path | None
    problem: str = ""  # "" or one of BROKEN_ARCHIVE, AMBIGUOUS, NO_PACKAGE
    detail: str = ""

    @property
    def student(self) -> str:
        return self.entry.student


def archive_stem(name: str) -> str | None:
    """The name without its archive suffix; None when `name` is not an archive."""
    lower = name.lower()
    suffix = next((s for s in ARCHIVE_SUFFIXES if lower.endswith(s)), None)
    return name[: -len(suffix)] if suffix else None


def safe_name(student: str) -> str:
    """A file name for `student`'s outputs (letters, digits, . _ @ + - only)."""
    return re.sub(r"[^A-Za-z0-9._@+-]", "_", student).lstrip(".") or "_"


def list_entries(folder: Path) -> tuple[list[Entry], list[Located], list[str]]:
    """(entries to locate, students with two entries, notes on what was ignored), by student name."""
    by_student: dict[str, list[Path]] = {}
    ignored = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.is_symlink():
            ignored.append(f"{path.name}: hidden or a link, ignored")
            continue
        student = path.name if path.is_dir() else archive_stem(path.name)
        if student is None:
            ignored.append(f"{path.name}: neither a folder nor an archive, ignored")
            continue
        by_student.setdefault(safe_name(student), []).append(path)
    entries, doubles = [], []
    for student, paths in by_student.items():
        if len(paths) == 1:
            entries.append(Entry(student, paths[0]))
        else:
            names = ", ".join(p.name for p in paths)
            doubles.append(Located(Entry(student, paths[0]), None, AMBIGUOUS, f"two submissions for {student}: {names}"))
    return entries, doubles, ignored


def _member_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise UnpackError(f"member {name!r} points outside the archive")
    return path


def _unzip(archive: Path, dest: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        members = zf.infolist()
        if len(members) > MAX_MEMBERS or sum(m.file_size for m in members) > MAX_UNPACKED_BYTES:
            raise UnpackError("too large to unpack")
        for member in members:
            rel = _member_path(member.filename)
            if stat.S_ISLNK(member.external_attr >> 16):
                continue  # a link in an archive is never followed, so never made
            target = dest.joinpath(*rel.parts)
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)


def _untar(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as tf:
        members = tf.getmembers()
        if len(members) > MAX_MEMBERS or sum(m.size for m in members) > MAX_UNPACKED_BYTES:
            raise UnpackError("too large to unpack")
        for member in members:
            _member_path(member.name)
        regular = [m for m in members if m.isdir() or m.isfile()]  # links and devices are never made
        tf.extractall(dest, members=regular, filter="data")


def unpack(archive: Path, dest: Path) -> None:
    """Unpack `archive` into the new folder `dest`; UnpackError with the reason when it cannot."""
    dest.mkdir(parents=True)
    try:
        if archive.name.lower().endswith(".zip"):
            _unzip(archive, dest)
        else:
            _untar(archive, dest)
    except UnpackError:
        raise
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error, ValueError) as e:
        raise UnpackError(f"{type(e).__name__}: {e}") from None


def locate(entry: Entry, package: str, work: Path) -> Located:
    """Unpack `entry` (into `work`) if it is an archive, then find its one package."""
    folder = entry.path
    if entry.archive:
        folder = work / entry.student
        shutil.rmtree(folder, ignore_errors=True)
        try:
            unpack(entry.path, folder)
        except UnpackError as e:
            return Located(entry, None, BROKEN_ARCHIVE, f"{entry.path.name} does not unpack: {e}")
    roots = find_roots(folder, package)
    if not roots:
        return Located(entry, None, NO_PACKAGE, f"no folder {package}/ with an __init__.py in {entry.path.name}")
    if len(roots) > 1:
        found = ", ".join(str(r.relative_to(folder) / package) for r in roots[:5])
        return Located(entry, None, AMBIGUOUS, f"{len(roots)} packages {package}/ in {entry.path.name}: {found}; "
                                               "keep one and grade again")
    return Located(entry, roots[0])
