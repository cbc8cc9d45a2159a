"""`python -m autograder`: a thin command line over the keyword-only functions of the package."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from autograder.authoring.commands import COMMANDS as AUTHORING_COMMANDS
from autograder.classroom.commands import COMMANDS as CLASSROOM_COMMANDS
from autograder.errors import GraderError
from autograder.host import atomic, attachments, report
from autograder.host.grade import test_files
from autograder.host.repo import Course, find_root
from autograder.host.submission import Grading, grade_submission, locate_package, write_reports
from autograder.notebooks.commands import notebooks as NOTEBOOK_COMMANDS
from autograder.options import sandbox_option

console = Console(stderr=False)


def _course(root: str | None) -> Course:
    return Course(Path(root).resolve() if root else find_root())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--root", default=None, help="course root (default: found from the current directory)")
@click.pass_context
def cli(ctx: click.Context, root: str | None) -> None:
    """Grade the course's assignments and keep the course tree consistent."""
    ctx.obj = _course(root)


@cli.command("list")
@click.pass_obj
def list_cmd(course: Course) -> None:
    """List the assignments with their stage, title and test files."""
    for aid in course.ids():
        spec = course.spec(aid)
        files = test_files(course, aid)
        console.print(f"[bold]{aid}[/]  stage {spec.stage}  {spec.title}  ({len(files)} test files)")


@cli.command()
@click.argument("ids", nargs=-1)
@click.option("--solution", is_flag=True, help="grade the reference solution instead of assignments/")
# no exists=True: a missing folder must still get its results file, which click would abort before
@click.option("--submission", type=click.Path(file_okay=False), help="grade this folder instead")
@sandbox_option
@click.option("--hardware", default=None, help="hardware tag for perf bars (default: detected)")
@click.option("--jobs", type=int, default=None, help="test files graded in parallel (default: CPU count on CPU)")
@click.option("--json", "json_path", type=click.Path(), default=None, help="write Gradescope results.json here")
@click.option("--junit", type=click.Path(), default=None, help="write JUnit XML here")
@click.option("--markdown", type=click.Path(), default=None, help="write a Markdown summary here")
@click.option("--strict", is_flag=True, help="exit 1 unless every graded test passed (a held test is not a pass)")
@click.option("-v", "--verbose", is_flag=True, help="print the output of failing public tests")
@click.pass_obj
def grade(course: Course, ids: tuple[str, ...], solution: bool, submission: str | None, sandbox: str,
          hardware: str | None, jobs: int | None, json_path: str | None, junit: str | None,
          markdown: str | None, strict: bool, verbose: bool) -> None:
    """Grade assignments (all present when no id is given)."""
    gradings: list[Grading] = []
    error = None
    try:
        targets = list(ids) or course.ids()
        if submission and len(targets) != 1:
            raise GraderError("--submission grades one assignment: name its id")
        for aid in targets:
            folder = _package_root(course, aid, submission)
            gradings.append(_grade_one(course, aid, solution, folder, sandbox, hardware, jobs, verbose,
                                       figures=attachments.figures_dir(json_path, markdown, junit)))
    except GraderError as e:  # a refusal the grader can explain: its results file says why (a failed grading)
        error = str(e) or type(e).__name__
        raise
    except BaseException:
        # Ctrl-C, a kill or a crash of the grader itself: no results file, which a caller could
        # take for a grade (an earlier complete file at that path is left as it was)
        json_path = junit = markdown = None
        raise
    finally:
        write_reports(gradings, error=error, json_path=json_path, junit_path=junit, markdown_path=markdown)
    results = [g.result for g in gradings]
    if len(results) > 1:
        console.rule("summary")
        for r in results:
            console.print(report.summary_line(r))
    if strict and any((t.graded or t.status == "held") and t.status != "passed" for r in results for t in r.tests):
        sys.exit(1)


def _package_root(course: Course, aid: str, submission: str | None) -> Path | None:
    """The folder of the submission that holds the package, found at any depth (`dave/s05/kvcache/`)."""
    if submission is None or not Path(submission).is_dir():
        return Path(submission) if submission else None  # grading says what is wrong with it
    root = locate_package(course, aid, Path(submission))
    if root != Path(submission):
        console.print(f"note: grading {escape(str(root))}, the folder in {escape(submission)} holding the package")
    return root


def _grade_one(course: Course, aid: str, solution: bool, submission: Path | None, sandbox: str,
               hardware: str | None, jobs: int | None, verbose: bool, *, figures: Path | None = None) -> Grading:
    """Grade `aid` before printing it: a report that fails to print loses no points. The figures
    its tests attached go under `figures` (beside the report files) first, so the table and the
    reports can say where they are."""
    columns = (TextColumn(f"grading {aid}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("collecting the tests", total=None)  # the count is known once they are collected

        def advance(label: str, done: int, total: int) -> None:  # test by test (autograder.host.progress)
            bar.update(task, completed=done, total=total, description=escape(label.split("::")[-1]))

        grading = grade_submission(course, aid, solution=solution, submission=submission, sandbox=sandbox,
                                   hardware=hardware, jobs=jobs, progress=advance)
    attachments.save(grading.result, figures)
    report.print_result(grading.result, console, verbose=verbose)
    return grading


@cli.command()
@click.argument("results_json", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("question")
@click.argument("points", type=float)
@click.option("--comment", default="", help="feedback shown with the points")
def manual(results_json: Path, question: str, points: float, comment: str) -> None:
    """Record an instructor's POINTS for a written answer (QUESTION: <assignment>:<id>) in a
    results.json written by `grade --json`; the total is updated in place."""
    import json

    from autograder.host.written import record_manual

    data = json.loads(results_json.read_text())
    try:
        row = record_manual(data, question, points, comment)
    except ValueError as e:
        raise GraderError(str(e)) from None
    atomic.write_text(results_json, json.dumps(data, indent=1))  # never a half-written results file
    console.print(f"{row['name']}: {points:g}/{row['max_score']:g}; total now {data['score']:g}", highlight=False)


@cli.command()
@click.argument("results_json", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("test")
@click.option("--release/--deny", required=True, help="award what the test earned before the hold, or nothing")
@click.option("--comment", default="", help="the reason, shown with the decision")
def review(results_json: Path, test: str, release: bool, comment: str) -> None:
    """Decide held tests (TEST: a nodeid, its end, or "all") in a results.json written by
    `grade --json`: --release awards what each earned before the hold, --deny nothing; the total is
    updated in place."""
    import json

    from autograder.host.review import record_review

    data = json.loads(results_json.read_text())
    try:
        rows = record_review(data, test, release=release, comment=comment)
    except ValueError as e:
        raise GraderError(str(e)) from None
    atomic.write_text(results_json, json.dumps(data, indent=1))  # never a half-written results file
    for row in rows:
        console.print(f"{row['name']}: {row['score']:g}/{row['max_score']:g}", highlight=False)
    console.print(f"total now {data['score']:g}", highlight=False)


for _command in AUTHORING_COMMANDS:  # stubs, check, handouts, mutants, ...: autograder/authoring/commands.py
    cli.add_command(_command)
for _command in CLASSROOM_COMMANDS:  # grade-class, gradebook, merge, gradescope: autograder/classroom/commands.py
    cli.add_command(_command)
cli.add_command(NOTEBOOK_COMMANDS)  # notebooks list|release|grade: autograder/notebooks/commands.py


def main() -> None:
    try:
        cli(standalone_mode=False)
    except GraderError as e:
        console.print(f"[red]error:[/] {escape(str(e))}", markup=True, highlight=False)
        sys.exit(2)
    except (click.exceptions.Abort, KeyboardInterrupt):
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
