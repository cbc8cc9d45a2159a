"""Grade a notebook with the course's pipeline: its answer cells become the package, graded by
grade_assignment (tests in the judge, the student's functions in a worker, like any package), and
its manually graded cells become written answers, pending until an instructor grades them.

A notebook that cannot be read is graded as one with no answers (every test fails, with a note
saying why): grading always yields a complete result."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from autograder.errors import GraderError
from autograder.host.fingerprint import grader_version
from autograder.host.grade import Progress, grade_assignment
from autograder.host.repo import Course
from autograder.host.stage import cleanup
from autograder.host.submission import Grading
from autograder.notebooks.cells import Cell, read_cells
from autograder.notebooks.exercise import load_exercise, stage_course
from autograder.notebooks.extract import Extracted, extract

SUBMISSION = "submission"  # the package folder made from the notebook, beside the staged course


def _submitted(notebook: Path) -> tuple[list[Cell], str]:
    """The notebook's cells (none when it cannot be read) and the note saying why."""
    try:
        return read_cells(notebook), ""
    except GraderError as e:
        return [], f"not graded as a notebook, every answer counts as missing: {e}"


def _write_submission(folder: Path, package: str, extracted: Extracted) -> None:
    (folder / package).mkdir(parents=True)
    (folder / package / "__init__.py").write_text(extracted.module)
    (folder / "answers").mkdir()
    for written_id, text in extracted.answers.items():
        (folder / "answers" / f"{written_id}.md").write_text(text + "\n")


def grade_notebook(*, course: Course, exercise_id: str, notebook: Path | None, sandbox: str = "auto",
                   hardware: str | None = None, jobs: int = 1,
                   progress: Progress | None = None) -> Grading:
    """Grade `notebook` (None: the source notebook's own answers, the reference) for `exercise_id`.

    `jobs`: test files graded at once; one by default, as a notebook's few fast tests cost less in
    one judge and worker than the start of a second pair saves."""
    exercise = load_exercise(course, exercise_id)
    source = exercise.source_cells()
    path = notebook if notebook is not None else exercise.notebook
    cells, why = (None, "") if notebook is None else _submitted(notebook)
    extracted = extract(source, cells)
    root = Path(tempfile.mkdtemp(prefix="ag-notebook-"))
    try:
        staged = stage_course(exercise, root / "course", cache=course.cache_dir)
        _write_submission(root / SUBMISSION, exercise.spec().package, extracted)
        result = grade_assignment(course=staged, assignment_id=exercise_id, submission=root / SUBMISSION,
                                  sandbox=sandbox, hardware=hardware, jobs=jobs, progress=progress)
        version = grader_version(staged, exercise_id)
    finally:
        cleanup(root)
    result.source = "solution" if notebook is None else str(notebook)
    result.notes[:0] = [n for n in (why, *extracted.notes) if n]
    digest = hashlib.sha256(path.read_bytes() if path.is_file() else b"").hexdigest()
    return Grading(result, digest, version)  # the hash: of the notebook file (the source notebook's for the reference)
