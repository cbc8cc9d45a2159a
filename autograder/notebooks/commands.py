"""`autograder notebooks ...`: list, release and grade the notebook exercises."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from autograder.errors import GraderError
from autograder.host import report
from autograder.host.repo import Course
from autograder.host.submission import write_results
from autograder.options import sandbox_option

console = Console()


@click.group()
def notebooks() -> None:
    """Notebook exercises: nbgrader source notebooks under solutions/notebooks/."""


@notebooks.command("list")
@click.pass_obj
def list_cmd(course: Course) -> None:
    """List the notebook exercises with their stage and title."""
    from autograder.notebooks.exercise import load_exercise, notebook_ids

    for exercise_id in notebook_ids(course):
        spec = load_exercise(course, exercise_id).spec()
        console.print(f"[bold]{exercise_id}[/]  stage {spec.stage}  {escape(spec.title)}")


@notebooks.command("release")
@click.argument("exercise_id")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="folder for the student notebook")
@click.pass_obj
def release_cmd(course: Course, exercise_id: str, out: Path) -> None:
    """Make the student notebook of EXERCISE_ID with nbgrader's generate_assignment."""
    from autograder.notebooks.release import release_notebook

    path = release_notebook(course=course, exercise_id=exercise_id, out=out)
    console.print(f"released {escape(str(path))}", highlight=False)


@notebooks.command("grade")
@click.argument("exercise_id")
@click.argument("notebook", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--solution", is_flag=True, help="grade the source notebook's own answers (the reference)")
@sandbox_option
@click.option("--hardware", default=None, help="hardware tag for perf bars (default: detected)")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None,
              help="write Gradescope results.json here")
@click.option("--student", default=None, help="record the grading in the class gradebook as this student's")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="class folder of the gradebook (default: results/class under the course root)")
@click.pass_obj
def grade_cmd(course: Course, exercise_id: str, notebook: Path | None, solution: bool, sandbox: str,
              hardware: str | None, json_path: Path | None, student: str | None, out: Path | None) -> None:
    """Grade a student's NOTEBOOK of EXERCISE_ID through the judge and worker like any package;
    its written answers stay pending (enter points with `autograder gradebook manual`, or
    `autograder manual` on the --json file)."""
    from autograder.notebooks.grade import grade_notebook
    from autograder.notebooks.record import record_grading

    if (notebook is None) != solution:
        raise GraderError("name the student's NOTEBOOK, or pass --solution (not both)")
    grading = grade_notebook(course=course, exercise_id=exercise_id, notebook=notebook, sandbox=sandbox,
                             hardware=hardware)
    if json_path is not None:
        write_results(json_path, [grading])
    report.print_result(grading.result, console)
    if student is not None:
        folder = (out or course.root / "results" / "class").resolve()
        path = record_grading(grading=grading, student=student, out=folder)
        console.print(f"recorded for {escape(student)} in {escape(str(folder))} (results: {escape(str(path))})",
                      highlight=False)
