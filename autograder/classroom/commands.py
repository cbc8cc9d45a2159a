"""The classroom's commands (added to `python -m autograder` by autograder/cli.py): thin click
wrappers over the keyword-only functions of this package."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autograder.classroom.engines import ENGINES, jobs_this_host_holds
from autograder.errors import GraderError
from autograder.host import atomic
from autograder.host.repo import Course
from autograder.options import sandbox_option

console = Console()
OUT_HELP = "class folder of the gradebook, results and exports (default: results/class under the course root)"


def _out(course: Course, out: str | None) -> Path:
    return Path(out).resolve() if out else course.root / "results" / "class"


def _say(line: str) -> None:
    console.print(escape(line), highlight=False, soft_wrap=True)


@click.command("grade-class")
@click.argument("aid")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--out", default=None, help=OUT_HELP)
@click.option("-j", "--jobs", type=int, default=2, show_default=True, help="submissions graded at once")
@click.option("--regrade", is_flag=True, help="grade again what the gradebook already holds")
@click.option("--times", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="CSV of student,submitted_at (ISO 8601) for the late policy")
@sandbox_option
@click.option("--hardware", default=None, help="hardware tag for perf bars (default: detected)")
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
              help="where gradings run: this machine's processes (-j), or Ray tasks (pip install -e .[cluster])")
@click.option("--ray-address", default=None,
              help="the Ray cluster's head, HOST:PORT (default: $RAY_ADDRESS, else a new Ray instance of this machine)")
@click.pass_obj
def grade_class_cmd(course: Course, aid: str, folder: Path, out: str | None, jobs: int, regrade: bool,
                    times: Path | None, sandbox: str, hardware: str | None, engine: str,
                    ray_address: str | None) -> None:
    """Grade every submission in FOLDER (one folder or archive per student) into the gradebook,
    resumably, then write the exports. With --engine ray, FOLDER, --out and the course must be on
    storage every node of the cluster shares, at the same paths; the gradebook stays with this command."""
    from autograder.classroom.export import export_class
    from autograder.classroom.grade_class import GRADEBOOK, ClassOptions, grade_class
    from autograder.classroom.gradebook import Gradebook

    if engine == "local":
        jobs, why = jobs_this_host_holds(jobs)
        if why:
            _say(f"note: {why}")
    try:
        options = ClassOptions(jobs=jobs, sandbox=sandbox, hardware=hardware, regrade=regrade, times=times,
                               engine=engine, ray_address=ray_address)
    except ValueError as e:
        raise GraderError(str(e)) from None
    target = _out(course, out)
    summary = grade_class(course=course, assignment_id=aid, folder=folder.resolve(), out=target, options=options,
                          say=_say)
    for note in summary.ignored:
        _say(f"note: {note}")
    for loc in summary.problems:
        _say(f"not graded: {loc.student}: {loc.problem}: {loc.detail}")
    with Gradebook(target / GRADEBOOK) as book:
        exported = export_class(book=book, assignment_id=aid, out=target)
    _say(f"{aid}: {len(summary.graded)} graded, {len(summary.kept)} already recorded, {len(summary.problems)} "
         f"not gradable, {len(summary.failed)} failed; exports in {exported}")
    for student, why in summary.failed:
        _say(f"grading failed (not recorded, run again to retry): {student}: {why}")
    if summary.failed:
        sys.exit(1)


@click.group()
def gradebook() -> None:
    """Look at the gradebook, enter written-answer points, review held tests, export."""


@gradebook.command("show")
@click.argument("aid")
@click.option("--out", default=None, help=OUT_HELP)
@click.pass_obj
def show(course: Course, aid: str, out: str | None) -> None:
    """The current grade of every student of AID."""
    from autograder.classroom.export import student_grades
    from autograder.classroom.grade_class import GRADEBOOK
    from autograder.classroom.gradebook import Gradebook

    table = Table(title=f"{aid} gradebook")
    for column in ("student", "score", "status", "late", "note"):
        table.add_column(column, overflow="fold")
    with Gradebook(_out(course, out) / GRADEBOOK) as book:
        for g in student_grades(book, aid):
            score = f"{g.score:g}/{g.max_score:g}" if g.graded else "–"
            table.add_row(*(escape(str(x)) for x in (g.row["student"], score, g.status, g.row["late_note"],
                                                     g.row["note"])))
    console.print(table)


@gradebook.command("manual")
@click.argument("aid")
@click.argument("student")
@click.argument("question")
@click.argument("points", type=float)
@click.option("--comment", default="", help="feedback shown with the points")
@click.option("--out", default=None, help=OUT_HELP)
@click.pass_obj
def manual_cmd(course: Course, aid: str, student: str, question: str, points: float, comment: str,
               out: str | None) -> None:
    """Record POINTS for STUDENT's written answer QUESTION (its id, e.g. median) of AID."""
    from autograder.classroom.export import export_class
    from autograder.classroom.grade_class import GRADEBOOK
    from autograder.classroom.gradebook import Gradebook

    target = _out(course, out)
    with Gradebook(target / GRADEBOOK) as book:
        try:
            full = book.set_manual(student, aid, question, points, comment)
        except ValueError as e:
            raise GraderError(str(e)) from None
        export_class(book=book, assignment_id=aid, out=target)
    _say(f"{student}, {aid}:{question}: {points:g}/{full:g} recorded; exports updated")


@gradebook.command("review")
@click.argument("aid")
@click.argument("student")
@click.argument("test")
@click.option("--release/--deny", required=True, help="award what the test earned before the hold, or nothing")
@click.option("--comment", default="", help="the reason, shown with the decision")
@click.option("--by", "reviewer", default=None, help="who decides, kept in the audit trail (default: the login name)")
@click.option("--out", default=None, help=OUT_HELP)
@click.pass_obj
def review_cmd(course: Course, aid: str, student: str, test: str, release: bool, comment: str,
               reviewer: str | None, out: str | None) -> None:
    """Release or deny STUDENT's held tests of AID (TEST: a nodeid, its end, or "all" still awaiting a
    decision) for the current submission: a release awards what each earned before the hold, a denial
    nothing. A regrade of the same submission keeps the decision; a new submission does not."""
    import getpass

    from autograder.classroom.export import export_class
    from autograder.classroom.grade_class import GRADEBOOK
    from autograder.classroom.gradebook import Gradebook
    from autograder.classroom.reviews import record_decision

    target = _out(course, out)
    with Gradebook(target / GRADEBOOK) as book:
        try:
            decided = record_decision(book, student=student, assignment=aid, test=test, release=release,
                                      reviewer=reviewer or getpass.getuser(), comment=comment, root=target)
        except ValueError as e:
            raise GraderError(str(e)) from None
        export_class(book=book, assignment_id=aid, out=target)
    for h in decided:
        _say(f"{student}, {h.name}: {h.awarded:g}/{h.outcome.points:g} ({'released' if release else 'denied'})")
    _say("exports updated")


@gradebook.command("held")
@click.argument("aid")
@click.option("--student", default=None, help="only this student's current submission")
@click.option("--decided", is_flag=True, help="also the tests already released or denied, with who, when and why")
@click.option("--out", default=None, help=OUT_HELP)
@click.pass_obj
def held_cmd(course: Course, aid: str, student: str | None, decided: bool, out: str | None) -> None:
    """The tests of AID held for an instructor's review: why, and what a release would award."""
    from autograder.classroom.grade_class import GRADEBOOK
    from autograder.classroom.gradebook import Gradebook
    from autograder.classroom.reviews import held_tests

    table = Table(title=f"{aid}: tests held for review")
    for column in ("student", "test", "reason", "would earn", "decision"):
        table.add_column(column, overflow="fold")
    with Gradebook(_out(course, out) / GRADEBOOK) as book:
        found = [h for h in held_tests(book, aid, student) if decided or h.decision is None]
    for h in found:
        o = h.outcome
        would = "unknown" if o.held_score is None else f"{o.held_score:g}"
        table.add_row(*(escape(x) for x in (h.student, o.nodeid, o.reason.splitlines()[0] if o.reason else "",
                                            f"{would}/{o.points:g}", h.decision.line() if h.decision else "awaiting")))
    console.print(table)
    _say(f"{sum(h.decision is None for h in found)} awaiting a decision")


@gradebook.command("export")
@click.argument("aid")
@click.option("--out", default=None, help=OUT_HELP)
@click.pass_obj
def export_cmd(course: Course, aid: str, out: str | None) -> None:
    """Write grades.csv, per-student results and the class report of AID."""
    from autograder.classroom.export import export_class
    from autograder.classroom.grade_class import GRADEBOOK
    from autograder.classroom.gradebook import Gradebook

    target = _out(course, out)
    with Gradebook(target / GRADEBOOK) as book:
        _say(f"exports in {export_class(book=book, assignment_id=aid, out=target)}")


@click.command()
@click.argument("first", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("second", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
def merge(first: Path, second: Path, output: Path) -> None:
    """Join a CPU result and a GPU-runner result (results.json) of the same submission into one grade."""
    from autograder.classroom.merge import MergeError, merge_results

    try:
        merged = merge_results(json.loads(first.read_text()), json.loads(second.read_text()),
                               (first.name, second.name))
    except MergeError as e:
        raise GraderError(f"not merged: {e}") from None
    atomic.write_text(output, json.dumps(merged, indent=1))
    _say(f"{output}: score {merged['score']:g} ({merged['output'].splitlines()[0]})")


@click.command("gradescope")
@click.argument("aid")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="the zip (default: results/gradescope/<id>.zip)")
@click.option("--datasets/--no-datasets", default=None, help="ship datasets/ (default: when the tests load it)")
@click.pass_obj
def gradescope_cmd(course: Course, aid: str, out: Path | None, datasets: bool | None) -> None:
    """Build the Gradescope autograder zip of AID (setup.sh, run_autograder, the grader, the tests)."""
    from autograder.classroom.gradescope import build_zip

    path = build_zip(course=course, assignment_id=aid, out=out or course.root / "results" / "gradescope" / f"{aid}.zip",
                     datasets=datasets)
    _say(f"{path}: upload it as the assignment's autograder (Ubuntu image)")


@click.command("gradescope-run", hidden=True)
@click.argument("aid")
@click.option("--autograder-root", type=click.Path(file_okay=False, path_type=Path), required=True)
@sandbox_option
def gradescope_run(aid: str, autograder_root: Path, sandbox: str) -> None:
    """Inside Gradescope's image (run_autograder): grade the submission into results/results.json."""
    from autograder.classroom.gradescope import run_autograder

    run_autograder(root=autograder_root.resolve(), assignment_id=aid, sandbox=sandbox)


COMMANDS = (grade_class_cmd, gradebook, merge, gradescope_cmd, gradescope_run)
