"""Release a notebook exercise: nbgrader's generate_assignment makes the student notebook (solution
regions cleared to stubs, written answers to a placeholder, cells locked and checksummed).

It runs as nbgrader's command line in a temporary nbgrader course folder (source/<id>/<id>.ipynb
and a copy of solutions/notebooks/nbgrader_config.py), so nbgrader's configuration and database
stay out of this process and out of the repository. The result is checked for leaks before it is
written: no solution marker, and no line of a solution region that the source does not also have
outside one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.errors import GraderError
from autograder.host.repo import Course
from autograder.notebooks.cells import ANSWER, WRITTEN, Cell, parse_cells
from autograder.notebooks.exercise import CONFIG, NotebookExercise, load_exercise
from autograder.notebooks.extract import MARKER

TIMEOUT_S = 300


def solution_lines(cells: list[Cell]) -> set[str]:
    """The stripped lines inside solution regions of answer cells, less those that also occur
    outside every region (a bare `return x` may well be in a docstring, too)."""
    inside, outside = set(), set()
    for cell in cells:
        if cell.role not in (ANSWER, WRITTEN):
            continue
        in_region = False
        for line in cell.source.splitlines():
            if MARKER.match(line):
                in_region = "BEGIN" in line
                continue
            (inside if in_region else outside).add(line.strip())
    return {line for line in inside - outside if len(line) > 3}


def leaks(released: list[Cell], source: list[Cell]) -> list[str]:
    """What of the source's solutions the released notebook still holds (empty: nothing)."""
    hidden = solution_lines(source)
    found = [f"{c.grade_id}: solution marker" for c in released if MARKER.search(c.source)]
    for cell in released:
        found += [f"{cell.grade_id}: {line.strip()!r}" for line in cell.source.splitlines() if line.strip() in hidden]
    return found


def _generate(exercise: NotebookExercise, work: Path) -> Path:
    """Run generate_assignment on a copy of the source; returns the released notebook."""
    (work / "source" / exercise.id).mkdir(parents=True)
    shutil.copy2(exercise.notebook, work / "source" / exercise.id / exercise.notebook.name)
    shutil.copy2(exercise.config, work / CONFIG)
    # nbgrader starts alembic from PATH: the interpreter's own bin folder first (a venv's)
    env = os.environ | {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    try:
        run = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", exercise.id, "--force"],
                             cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise GraderError(f"nbgrader generate_assignment took over {TIMEOUT_S} s") from None
    released = work / "release" / exercise.id / exercise.notebook.name
    if run.returncode != 0 or not released.is_file():
        if "No module named nbgrader" in run.stderr:
            raise GraderError("releasing a notebook needs nbgrader: pip install -e '.[notebooks]' (make setup does)")
        raise GraderError(f"nbgrader generate_assignment failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
    return released


def release_notebook(*, course: Course, exercise_id: str, out: Path) -> Path:
    """Write the student notebook of `exercise_id` into the folder `out`; returns its path."""
    exercise = load_exercise(course, exercise_id)
    target = out / exercise.notebook.name
    if target.exists():
        raise GraderError(f"{target} already exists: choose a new folder or remove it")
    with tempfile.TemporaryDirectory(prefix="ag-nbgrader-") as work:
        released = _generate(exercise, Path(work))
        text = released.read_text()
    if found := leaks(parse_cells(text, released.name), exercise.source_cells()):
        raise GraderError(f"the released {exercise.notebook.name} would leak: " + "; ".join(found[:5]))
    out.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target
