"""Stage: build the fresh work dirs that pytest runs in.

A work dir holds the assignment's package (the student's whitelisted files over the generated
stub), the *master* conftest and support files, and the test files of its run from the master
tree — never a student's copy of a test or conftest, never an instructor-only file (rubrics, the
reference's own answer data), and the test files of its own run only: a run of public files holds
no hidden/ folder. Only the run's uid may enter it (0700): under `--sandbox none`, where every run
sees the host's /tmp, a public run's uid cannot read a hidden run's work dir beside it.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from autograder.host.course_files import CACHE_PARTS, counts, instructor_only
from autograder.host.spec import AssignmentSpec

TEST_DIRS = ("tests", "hidden")
NEVER_STAGED = CACHE_PARTS | {"mutants.toml", "mutants.lock", "mutation.toml", "tasks.toml"}
ANSWERS = "answers"  # the student's own answers only (editable "answers/*.toml"); the master's never reach a run


def new_root() -> Path:
    """A temp dir other uids may traverse (the sandbox runs as its own uid when we are root)."""
    root = Path(tempfile.mkdtemp(prefix="autograder-"))
    root.chmod(0o711)
    return root


def _is_editable(rel: Path, spec: AssignmentSpec) -> bool:
    return any(fnmatch.fnmatch(str(rel), pattern) for pattern in spec.editable)


def walk_no_links(directory: Path) -> tuple[list[Path], list[Path]]:
    """(regular files, symbolic links) under `directory`, relative to it; no link is ever followed,
    so a submission cannot make the trusted side read a file outside it (e.g. the reference)."""
    files, links = [], []
    for dirpath, dirnames, filenames in os.walk(directory):  # os.walk does not descend linked folders
        here = Path(dirpath)
        for name in dirnames + filenames:
            path = here / name
            rel = path.relative_to(directory)
            if NEVER_STAGED & set(rel.parts):
                continue
            if path.is_symlink():
                links.append(rel)
            elif name in filenames and path.is_file():
                files.append(rel)
        dirnames[:] = [d for d in dirnames if d not in NEVER_STAGED and not (here / d).is_symlink()]
    return sorted(files), sorted(links)


def read_no_follow(path: Path) -> bytes:
    """The bytes of `path`, refusing a symbolic link even if one replaced the file since the walk."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _write(target: Path, files: dict[Path, bytes]) -> None:
    for rel, data in files.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(data)


def _support_files(master_dir: Path, spec: AssignmentSpec) -> dict[Path, bytes]:
    """Master files every run needs: root conftest, data, scripts (not tests, not the package)."""
    files = {}
    for path in sorted(master_dir.rglob("*")):
        rel = path.relative_to(master_dir)
        top = rel.parts[0]
        if not path.is_file() or NEVER_STAGED & set(rel.parts) or not counts(rel) or instructor_only(rel):
            continue  # rubrics/ and the like are the instructor's: no run needs them
        if top in TEST_DIRS or top in spec.packages or top == ANSWERS:
            continue
        files[rel] = path.read_bytes()
    return files


def _test_dir_files(master_dir: Path, test_files: list[Path] | None) -> dict[Path, bytes]:
    """The given test files plus the non-test files of their folders (conftest.py, helpers, data);
    all test files of every folder when `test_files` is None (the trusted collection run)."""
    files = {}
    folders = sorted({t.parent for t in test_files}) if test_files is not None else [Path(d) for d in TEST_DIRS]
    for folder in folders:
        for path in sorted((master_dir / folder).rglob("*")) if (master_dir / folder).is_dir() else []:
            rel = path.relative_to(master_dir)
            if not path.is_file() or NEVER_STAGED & set(rel.parts) or not counts(rel):
                continue
            is_test = path.name.startswith("test_") and path.suffix == ".py"
            if test_files is None or not is_test or rel in test_files:
                files[rel] = path.read_bytes()
    return files


def stage(
    *,
    root: Path,
    name: str,
    master_dir: Path,
    spec: AssignmentSpec,
    package_files: dict[Path, bytes],
    test_files: list[Path] | None,
) -> Path:
    """Create `root/name` holding the package files, master support files and test files."""
    workdir = root / name
    workdir.mkdir(mode=0o700)
    _write(workdir, _support_files(master_dir, spec))
    _write(workdir, _test_dir_files(master_dir, test_files))
    _write(workdir, package_files)
    for sub in ("home", "tmp"):
        (workdir / sub).mkdir(exist_ok=True)
    return workdir


@dataclass
class SubmittedPackage:
    """The package files a run uses, and what reading the submission showed (links, missing files)."""

    files: dict[Path, bytes]
    notes: list[str] = field(default_factory=list)


def student_package(student_dir: Path, spec: AssignmentSpec, base: dict[Path, bytes], *,
                    solution: bool = False) -> SubmittedPackage:
    """`base` (the stub and the given packages) overlaid with the student's editable files; links are
    refused, with a note. A given package the submission leaves out is the course's copy, said once
    per package (not at all for the reference, whose folder never holds one)."""
    files = dict(base)
    regular, all_links = walk_no_links(student_dir)
    packages = [Path(p) for p in spec.packages]
    links = [rel for rel in all_links
             if any(rel == p or p in rel.parents for p in packages) or _is_editable(rel, spec)]
    notes = [_link_note(student_dir, rel, base) for rel in links]
    for rel in regular:
        if _is_editable(rel, spec):
            files[rel] = read_no_follow(student_dir / rel)
    given = {g.package for g in spec.given_packages}
    absent = sorted(p for p in given if not (student_dir / p).is_dir() or (student_dir / p).is_symlink())
    if absent and not solution:
        notes += [f"{p}/ is not in the submission: the course's given {p} was used" for p in absent]
    for rel in sorted(base):
        under_link = any(rel == link or link in rel.parents for link in links)
        if _is_editable(rel, spec) and rel not in regular and not under_link and rel.parts[0] not in absent:
            notes.append(f"{rel} is missing from the submission: the untouched stub was graded in its place")
    return SubmittedPackage(files, notes)


def _link_note(student_dir: Path, rel: Path, base: dict[Path, bytes]) -> str:
    kind = "folder" if (student_dir / rel).is_dir() else "file"
    replaced = any(p == rel or rel in p.parents for p in base)
    fallback = "the untouched stub was graded in its place" if replaced else "it was left out"
    return f"{rel} is a symbolic link; submit the {kind} itself (links are not followed: {fallback})"


def cleanup(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
