"""Where a notebook exercise lives, and the one-assignment course its grading runs in.

solutions/notebooks/<id>/ holds the nbgrader source notebook `<id>.ipynb` (solution regions between
`### BEGIN SOLUTION` and `### END SOLUTION`), an assignment.toml, and tests/ and hidden/ as in any
assignment. They sit under solutions/ because the source notebook holds the solutions: that tree
never ships (course/ does). Grading stages a course of one assignment in a temporary folder:
solutions/<id>/ with the spec (plus a [[written]] entry per manually graded cell), the master tests,
and the package made from the source notebook's answer cells (the reference, solution markers kept,
so the pipeline stubs it like any reference)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from autograder.errors import GraderError
from autograder.host.course_files import ignore
from autograder.host.repo import Course
from autograder.host.spec import AssignmentSpec, load_spec
from autograder.notebooks.cells import Cell, read_cells
from autograder.notebooks.extract import extract, written_questions

NOTEBOOKS = "notebooks"  # solutions/notebooks/
CONFIG = "nbgrader_config.py"
STAGED = ("tests", "hidden", "conftest.py")  # what grading reads from the exercise folder besides the spec


@dataclass(frozen=True)
class NotebookExercise:
    id: str
    folder: Path  # solutions/notebooks/<id>

    def __post_init__(self) -> None:
        if not (self.folder / "assignment.toml").is_file() or not self.notebook.is_file():
            raise ValueError(f"{self.folder}: a notebook exercise needs assignment.toml and {self.id}.ipynb")

    @property
    def notebook(self) -> Path:
        return self.folder / f"{self.id}.ipynb"

    @property
    def config(self) -> Path:
        return self.folder.parent / CONFIG

    def spec(self) -> AssignmentSpec:
        spec = load_spec(self.folder / "assignment.toml")
        if spec.id != self.id:
            raise GraderError(f"{self.folder}/assignment.toml: id {spec.id!r} differs from the folder's name")
        return spec

    def source_cells(self) -> list[Cell]:
        return read_cells(self.notebook)


def notebook_ids(course: Course) -> list[str]:
    base = course.solutions / NOTEBOOKS
    return sorted(p.name for p in base.iterdir() if (p / "assignment.toml").is_file()) if base.is_dir() else []


def load_exercise(course: Course, exercise_id: str) -> NotebookExercise:
    if exercise_id not in (known := notebook_ids(course)):
        raise GraderError(f"unknown notebook exercise {exercise_id!r}; known: {', '.join(known) or 'none'} "
                          f"(they live in solutions/{NOTEBOOKS}/, which this checkout "
                          f"{'has' if course.has_solutions else 'does not have'})")
    return NotebookExercise(exercise_id, course.solutions / NOTEBOOKS / exercise_id)


def _written_toml(source: list[Cell]) -> str:
    """[[written]] tables from the manually graded cells (a JSON string is a TOML basic string)."""
    return "".join(f"\n[[written]]\nid = {json.dumps(q.id)}\npoints = {q.points!r}\n"
                   f"question = {json.dumps(q.question, ensure_ascii=False)}\n" for q in written_questions(source))


def stage_course(exercise: NotebookExercise, root: Path, cache: Path | None = None) -> Course:
    """The course of one assignment, `exercise`, under `root` (a new folder): what grade_assignment
    reads; `cache`: where its collected test manifests are cached."""
    source = exercise.source_cells()
    spec = exercise.spec()
    if spec.written:
        raise GraderError(f"{exercise.folder}/assignment.toml: leave out [[written]]; the notebook's manually "
                          "graded cells are the written questions")
    folder = root / "solutions" / exercise.id
    folder.mkdir(parents=True)
    for name in STAGED:
        if (exercise.folder / name).is_dir():
            shutil.copytree(exercise.folder / name, folder / name, ignore=ignore())
        elif (exercise.folder / name).is_file():
            shutil.copy2(exercise.folder / name, folder / name)
    spec_text = (exercise.folder / "assignment.toml").read_text()
    (folder / "assignment.toml").write_text(spec_text + _written_toml(source))
    (folder / spec.package).mkdir()
    (folder / spec.package / "__init__.py").write_text(extract(source, None).module)
    return Course(root, cache=cache)
