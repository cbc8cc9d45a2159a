"""A class of generated submissions of the demo course (tests/fixtures/demo_course), and ways to
read what grading it recorded: shared by the tests of `autograder grade-class`, whatever engine
runs the gradings."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autograder.classroom.discover import Entry, locate
from autograder.host.grade import grade_assignment

# student -> (what they submit, how it lies in the class folder)
CLASS = {
    "ada": ("full", "dir"), "ben": ("full", "dir"), "cy": ("full", "dir"), "dee": ("full", "git"),
    "eli": ("full", "zip"), "gus": ("full", "nested"), "hal": ("full", "nested2"),
    "ivy": ("partial_add", "dir"), "kim": ("partial_add", "nested"), "lee": ("partial_add", "zip"),
    "max": ("partial_mean", "dir"), "ned": ("partial_mean", "zip"), "oz": ("stub", "dir"), "quin": ("stub", "tgz"),
    "ray": ("broken", "zip"), "sue": ("broken", "tgz"), "fay": ("broken", "zip"),
    "tom": ("ambiguous", "dir"), "pam": ("ambiguous", "zip"), "jo": ("loose", "dir"),
}


def _functions(source: str) -> dict[str, str]:
    """Top-level chunks of a module: the header ("") and each `def`, by name."""
    chunks = re.split(r"(?m)^(?=def )", source)
    return {"": chunks[0], **{re.match(r"def (\w+)", c).group(1): c for c in chunks[1:]}}


def _package(course, kind: str) -> dict[str, str]:
    """The demo package of one kind: the reference, the stub, or the reference with one function
    replaced by the stub's (partial_add, partial_mean)."""
    ref, stub = (base / "s00_demo" / "demo" for base in (course.solutions, course.assignments))
    if kind in ("full", "stub"):
        src = ref if kind == "full" else stub
        return {p.name: p.read_text() for p in src.glob("*.py")}
    ops = _functions((ref / "ops.py").read_text())
    ops[kind.removeprefix("partial_")] = _functions((stub / "ops.py").read_text())[kind.removeprefix("partial_")]
    return {"__init__.py": (ref / "__init__.py").read_text(), "ops.py": "".join(ops.values())}


def _write(folder: Path, files: dict[str, str]) -> None:
    (folder / "demo").mkdir(parents=True)
    for name, text in files.items():
        (folder / "demo" / name).write_text(text)


def _git_commit(folder: Path, when: str) -> None:
    env = os.environ | {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when, "GIT_AUTHOR_NAME": "s",
                        "GIT_AUTHOR_EMAIL": "s@x", "GIT_COMMITTER_NAME": "s", "GIT_COMMITTER_EMAIL": "s@x"}
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "submit"]):
        subprocess.run(["git", "-C", str(folder), *argv], check=True, env=env)


def make_class(course, folder: Path, students: dict[str, tuple[str, str]] = CLASS) -> None:
    """One entry per student of `students` (student -> (kind, layout), as in CLASS) under `folder`."""
    staging = folder.parent / "staging"
    for student, (kind, layout) in students.items():
        files = _package(course, "full" if kind in ("broken", "ambiguous", "loose") else kind)
        if kind == "loose":  # the files without their package folder
            (folder / student).mkdir()
            for name, text in files.items():
                (folder / student / name).write_text(text)
            continue
        if layout in ("dir", "git", "nested", "nested2"):
            root = folder / student / {"dir": "", "git": "", "nested": "s00_demo", "nested2": "work/s00_demo"}[layout]
            _write(root, files)
            if kind == "ambiguous":
                _write(folder / student / "old_attempt", files)
            if layout == "git":
                _git_commit(root, "2027-01-12T10:00:00+00:00")  # 2 days late
            continue
        src = staging / student
        _write(src / "s00_demo" if kind.startswith("partial") else src, files)  # partial archives nest a folder
        if kind == "ambiguous":
            _write(src / "backup", files)
        if layout == "zip":
            with zipfile.ZipFile(folder / f"{student}.zip", "w") as zf:
                for path in sorted(src.rglob("*.py")):
                    zf.write(path, path.relative_to(src))
        else:
            with tarfile.open(folder / f"{student}.tar.gz", "w:gz") as tf:
                tf.add(src, arcname=".")
        if kind == "broken":  # cut short mid-upload
            archive = next(folder.glob(f"{student}.*"))
            archive.write_bytes(archive.read_bytes()[:60])
    shutil.rmtree(staging)


def graded_rows(db: Path) -> dict[str, tuple]:
    """student -> (row id, graded_at, score) of the graded rows; {} while the gradebook is not there."""
    if not db.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            rows = con.execute("SELECT student, id, graded_at, score FROM grades WHERE status='graded'").fetchall()
    except sqlite3.OperationalError:  # created but not yet initialised
        return {}
    return {r[0]: tuple(r[1:]) for r in rows}


def cli(course, *args: str) -> list[str]:
    return [sys.executable, "-m", "autograder", "--root", str(course.root), *args]


def scores_alone(course, folder: Path, hashes: dict[str, str], work: Path) -> dict[str, float]:
    """Submission hash -> the score of that submission graded alone with grade_assignment, for the
    students in `hashes` (student -> submission hash; students of one hash submitted the same files)."""
    roots = {}
    for student, digest in hashes.items():
        entry = next(p for p in folder.iterdir() if p.name.split(".")[0] == student)
        roots.setdefault(digest, locate(Entry(student, entry), "demo", work).root)
    with ThreadPoolExecutor(2) as pool:  # two at a time, as a class is graded
        scores = pool.map(lambda root: grade_assignment(course=course, assignment_id="s00_demo", submission=root,
                                                        sandbox="none", hardware="cpu").score, roots.values())
        return dict(zip(roots, scores, strict=True))
