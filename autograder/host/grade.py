"""Grade one assignment: stage -> sandbox -> collect -> score, one sandboxed pytest per test file."""

from __future__ import annotations

import os
import time
from pathlib import Path

from autograder.errors import GraderError
from autograder.hardware import hardware_tag
from autograder.host.collect import collect_expected
from autograder.host.probe import IMPORT_TIMEOUT_S
from autograder.host.progress import Progress, Tally
from autograder.host.render import given_packages, render_package
from autograder.host.repo import Course
from autograder.host.results import FAILED, AssignmentResult, ExpectedTest, TestResult
from autograder.host.runs import Job, base_env, grade_files, probe_and_grade
from autograder.host.scan import array_library_imports, hold_flagged, scan_package
from autograder.host.score import score_all
from autograder.host.spec import AssignmentSpec
from autograder.host.stage import (
    TEST_DIRS,
    cleanup,
    new_root,
    read_no_follow,
    stage,
    student_package,
    walk_no_links,
)
from autograder.host.written import grade_written
from autograder.sandbox import select_backend


def grade_assignment(
    *,
    course: Course,
    assignment_id: str,
    solution: bool = False,
    submission: Path | None = None,
    sandbox: str = "auto",
    hardware: str | None = None,
    jobs: int | None = None,
    only_files: list[str] | None = None,
    progress: Progress | None = None,
    import_timeout_s: float = IMPORT_TIMEOUT_S,
    probe: bool = True,
    first_failure: bool = False,
) -> AssignmentResult:
    """Grade the student's copy (default), the reference (`solution`) or a `submission` folder.

    `import_timeout_s` bounds the probe that imports the package once before any test runs;
    `probe=False` skips it (a broken variant of the reference: it imports, and only its score counts).
    `first_failure` stops each run at its first failed test and keeps only the tests that reported
    (a broken variant needs one lost point, not all of them): the result is then partial.
    """
    start = time.monotonic()
    spec = course.spec(assignment_id)
    master_dir = course.master_dir(assignment_id)
    solution_dir = course.solution_dir(assignment_id)
    if solution and solution_dir is None:
        raise GraderError(f"--solution needs solutions/{assignment_id}, which this checkout does not have")
    if submission is not None and not submission.is_dir():
        raise GraderError(f"the submission folder {submission} does not exist (or is not a folder): "
                          "check the path given to --submission")
    source_dir = submission or (solution_dir if solution else course.student_dir(assignment_id))
    if not (source_dir / spec.package).is_dir():
        raise GraderError(f"{source_dir}: no package folder {spec.package!r} to grade")
    tag = hardware_tag(hardware)
    backend = select_backend(sandbox, gpu=tag != "cpu")
    given = given_packages(course, spec)
    base = render_package(solution_dir, spec.packages, spec.task_prefix, given) if solution_dir else {}
    # The collection run imports the package it is given outside the sandbox: the reference, or where
    # this checkout has none the course's own copy in assignments/, never a submission from elsewhere
    # (grading in place, that copy is the student's own work on their own machine).
    trusted = given | _package_files(solution_dir or course.student_dir(assignment_id), spec)
    package = student_package(source_dir, spec, base, solution=solution)
    root = new_root()
    try:
        expected = _collect(course, spec, master_dir, trusted, root)
        files = sorted({t.file for t in expected if only_files is None or t.file in only_files})
        # an early stop wants one process over every file: it ends at the first failure in any of them
        workers = 1 if first_failure else jobs or (min(len(files), os.cpu_count() or 1) if tag == "cpu" else 1)
        threads = max(1, (os.cpu_count() or 1) // max(1, workers))
        result = AssignmentResult(assignment_id, spec.title, tag, backend.name,
                                  "solution" if solution else str(submission) if submission else "student",
                                  hidden_available=(master_dir / "hidden").is_dir() and only_files is None)
        result.notes.extend(backend.notes() + package.notes)
        flagged = [] if solution else scan_package(package.files, base)  # holds passed tests (below)
        tally = Tally(sum(t.file in files for t in expected), progress) if progress else None
        job = Job(backend, spec, course, root, master_dir, package.files, expected, tag, threads,
                   first_failure=first_failure, tally=tally, reference=solution)
        if refused := _refused(spec, package.files, base):
            result.notes.insert(0, refused)
            result.tests = [TestResult(t, FAILED, refused) for t in expected if t.file in files]
        else:
            if probe:
                probe_and_grade(job, files, workers, result, import_timeout_s)
            else:
                grade_files(job, files, workers, result)
    finally:
        cleanup(root)
    if only_files is None:
        result.tests += grade_written(spec, source_dir)
    score_all(result.tests, spec, tag)
    if note := hold_flagged(result.tests, flagged):  # after scoring: a perf test for other hardware stays so
        result.notes.insert(0, note)
    result.wall_s = time.monotonic() - start
    return result


def _collect(course: Course, spec: AssignmentSpec, master_dir: Path, trusted: dict[Path, bytes],
             root: Path) -> list[ExpectedTest]:
    """The master tests' ids, points and marks, collected over trusted code (cached by content)."""
    collect_dir = stage(root=root, name="collect", master_dir=master_dir, spec=spec, package_files=trusted,
                        test_files=None)
    return collect_expected(collect_dir, base_env(collect_dir, 1), course.cache_dir,
                            spec.package, spec.packages[1:])


def expected_tests(course: Course, assignment_id: str) -> list[ExpectedTest]:
    """Every graded test of an assignment, as the grader expects it (from the reference's package)."""
    spec = course.spec(assignment_id)
    source = course.solution_dir(assignment_id) or course.student_dir(assignment_id)
    root = new_root()
    try:
        return _collect(course, spec, course.master_dir(assignment_id),
                    given_packages(course, spec) | _package_files(source, spec), root)
    finally:
        cleanup(root)


def _refused(spec: AssignmentSpec, files: dict[Path, bytes], base: dict[Path, bytes]) -> str:
    """Why the package is not graded at all ("" when it is): a kernel exercise computes in its
    kernels, not in an array library beside them."""
    arrays = array_library_imports(files, base) if spec.accounting.compute_in_kernels else []
    if not arrays:
        return ""
    return ("not graded: in this kernel exercise the package may not import an array library that computes "
            "outside torch: " + "; ".join(arrays[:5]))


def _package_files(directory: Path, spec: AssignmentSpec) -> dict[Path, bytes]:
    """The regular files of the package and of the given packages found in `directory`; a symbolic
    link is never followed (nor staged)."""
    out: dict[Path, bytes] = {}
    for package in spec.packages:
        files, _links = walk_no_links(directory / package) if (directory / package).is_dir() else ([], [])
        out |= {Path(package) / rel: read_no_follow(directory / package / rel) for rel in files}
    return out


def test_files(course: Course, assignment_id: str) -> list[str]:
    master = course.master_dir(assignment_id)
    return sorted(str(p.relative_to(master)) for d in TEST_DIRS for p in (master / d).glob("test_*.py"))
