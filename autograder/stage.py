"""Stage: build the fresh work dirs that pytest runs in.

A work dir holds the assignment's package (the student's whitelisted files over the generated
stub), the *master* conftest and support files, and the test files of its run from the master
tree — never a student's copy of a test or conftest.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile
from pathlib import Path

from autograder.spec import AssignmentSpec

TEST_DIRS = ("tests", "hidden")
NEVER_STAGED = {"mutants.toml", "__pycache__", ".pytest_cache", ".hypothesis"}


def new_root() -> Path:
    """A temp dir other uids may traverse (the sandbox runs as its own uid when we are root)."""
    root = Path(tempfile.mkdtemp(prefix="autograder-"))
    root.chmod(0o711)
    return root


def editable_files(student_dir: Path, spec: AssignmentSpec) -> list[Path]:
    """Relative paths under `student_dir` that the spec lets a student change."""
    found = []
    for path in sorted(student_dir.rglob("*")):
        rel = path.relative_to(student_dir)
        if path.is_file() and not NEVER_STAGED & set(rel.parts):
            if any(fnmatch.fnmatch(str(rel), pattern) for pattern in spec.editable):
                found.append(rel)
    return found


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
        if not path.is_file() or NEVER_STAGED & set(rel.parts) or path.suffix == ".pyc":
            continue
        if top in TEST_DIRS or top == spec.package:
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
            if not path.is_file() or NEVER_STAGED & set(rel.parts) or path.suffix == ".pyc":
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
    workdir.mkdir()
    _write(workdir, _support_files(master_dir, spec))
    _write(workdir, _test_dir_files(master_dir, test_files))
    _write(workdir, package_files)
    for sub in ("home", "tmp"):
        (workdir / sub).mkdir(exist_ok=True)
    return workdir


def give_to(workdir: Path, uid: int | None) -> None:
    """Hand the work dir to the sandbox uid (it must write results, caches, temp files there)."""
    if uid is None:
        return
    for dirpath, _dirnames, filenames in os.walk(workdir):
        os.chown(dirpath, uid, uid)
        for name in filenames:
            os.chown(os.path.join(dirpath, name), uid, uid)


def student_package(student_dir: Path, spec: AssignmentSpec, base: dict[Path, bytes]) -> dict[Path, bytes]:
    """The package a run uses: `base` (the stub) overlaid with the student's editable files."""
    files = dict(base)
    for rel in editable_files(student_dir, spec):
        files[rel] = (student_dir / rel).read_bytes()
    return files


def cleanup(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
