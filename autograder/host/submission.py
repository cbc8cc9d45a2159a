"""One grading, one owner: a submission in, a `Grading` out, its results file written one way.

Every door that grades (the `grade` command, `grade-class`, the Gradescope entry point, notebook
grading) goes through here:
- `locate_package`: the folder of a submission that holds the package, at any depth;
- `grade_submission`: grade it (autograder/host/grade.py) and say what identifies the grading (the
  submission's hash and the grader's version, autograder/host/fingerprint.py);
- `write_results` / `write_reports`: results.json (and JUnit, Markdown) with that identity in
  the file's extra_data, each written whole or not at all (autograder/host/report.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.errors import GraderError
from autograder.host import result_files
from autograder.host.fingerprint import grader_version, submission_hash
from autograder.host.grade import Progress, grade_assignment
from autograder.host.repo import Course
from autograder.host.results import AssignmentResult


@dataclass(frozen=True)
class Grading:
    """One assignment's result, and what identifies the grading in a gradebook or a merge."""

    result: AssignmentResult
    submission_hash: str
    grader_version: str
    student: str | None = None

    def identity(self) -> dict[str, str]:
        return {"submission_hash": self.submission_hash, "grader_version": self.grader_version,
                "hardware": self.result.hardware}


SKIPPED_DIRS = frozenset({"__MACOSX", "__pycache__", "node_modules"})  # besides hidden ones (.git, .venv)


def find_roots(folder: Path, package: str) -> list[Path]:
    """Every folder under `folder` (itself included) that holds `package/__init__.py`; no link is
    followed, hidden and tool folders are skipped, and nothing inside a found package is searched."""
    roots = []
    for dirpath, dirnames, _files in os.walk(folder):
        here = Path(dirpath)
        if package in dirnames and not (here / package).is_symlink() and (here / package / "__init__.py").is_file():
            roots.append(here)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIPPED_DIRS
                             and d != package and not (here / d).is_symlink())
    return sorted(roots)


def package_root(folder: Path, package: str) -> Path:
    """The one folder under `folder` holding the package (`folder` itself when it holds it or when
    none does); ValueError when two do."""
    if (folder / package).is_dir():
        return folder
    roots = find_roots(folder, package)
    if len(roots) > 1:
        found = ", ".join(str(r.relative_to(folder) / package) for r in roots[:5])
        raise ValueError(f"{folder}: {len(roots)} packages {package}/ in it ({found}): keep one")
    return roots[0] if roots else folder


def locate_package(course: Course, assignment_id: str, folder: Path) -> Path:
    """The folder under `folder` that holds the assignment's package, found at any depth
    (`dave/s05/kvcache/`); GraderError when more than one does."""
    try:
        return package_root(folder, course.spec(assignment_id).package)
    except ValueError as e:
        raise GraderError(str(e)) from None


def source_of(course: Course, assignment_id: str, *, submission: Path | None, solution: bool) -> Path:
    """The folder a grading reads: the submission, the reference, or the student copy in assignments/."""
    if submission is not None:
        return submission
    found = course.solution_dir(assignment_id) if solution else course.student_dir(assignment_id)
    if found is None:
        raise GraderError(f"{assignment_id}: this checkout has no reference solution to grade")
    return found


def grade_submission(course: Course, assignment_id: str, *, submission: Path | None = None, solution: bool = False,
                     sandbox: str = "auto", hardware: str | None = None, jobs: int | None = None,
                     progress: Progress | None = None, student: str | None = None,
                     identity: tuple[str, str] | None = None) -> Grading:
    """Grade one assignment's submission (or the reference, or assignments/<id>). `identity`:
    (submission hash, grader version) when the caller computed them already (grade-class keys its
    gradebook on them before grading); else computed here."""
    result = grade_assignment(course=course, assignment_id=assignment_id, solution=solution, submission=submission,
                              sandbox=sandbox, hardware=hardware, jobs=jobs, progress=progress)
    if identity is None:
        source = source_of(course, assignment_id, submission=submission, solution=solution)
        identity = (submission_hash(source, course.spec(assignment_id)), grader_version(course, assignment_id))
    return Grading(result, *identity, student=student)


def meta_of(gradings: list[Grading]) -> dict[str, Any] | None:
    """The results file's extra_data: each assignment's identity, and the student when one is named."""
    if not gradings:
        return None
    students = {g.student for g in gradings if g.student is not None}
    meta: dict[str, Any] = {"student": students.pop()} if len(students) == 1 else {}
    return meta | {"assignments": {g.result.id: g.identity() for g in gradings}}


def write_results(path: Path, gradings: list[Grading], *, upload: bool = False) -> None:
    """results.json of `gradings` (in the form Gradescope shows with `upload`)."""
    result_files.write_json(path, [g.result for g in gradings], meta=meta_of(gradings), upload=upload)


def write_reports(gradings: list[Grading], *, error: str | None, json_path: str | None, junit_path: str | None,
                  markdown_path: str | None) -> None:
    """The report files asked for (`result_files.write_files`), with the gradings' identities."""
    result_files.write_files([g.result for g in gradings], error=error, meta=meta_of(gradings), json_path=json_path,
                       junit_path=junit_path, markdown_path=markdown_path)
