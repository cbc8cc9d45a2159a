"""The instructor's commands that keep the course tree consistent: stubs, check, handouts, mutants,
tasks, mutation, calibrate, schedule and release (`python -m autograder <command>`; autograder/cli.py
adds them to its group)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from autograder.authoring import invariants, stubs
from autograder.errors import GraderError
from autograder.host.repo import Course
from autograder.options import sandbox_option

console = Console(stderr=False)


@click.command("stubs")
@click.option("--check", is_flag=True, help="only report whether assignments/ is up to date")
@click.pass_obj
def stubs_cmd(course: Course, check: bool) -> None:
    """Regenerate assignments/ from solutions/ (or check that it is current)."""
    if not course.has_solutions:
        raise GraderError("no solutions/ in this checkout: stubs are generated from the instructor tree")
    if check:
        stale = {aid: stubs.stale_paths(course, aid) for aid in course.ids()}
        stale = {k: v for k, v in stale.items() if v}
        for aid, problems in stale.items():
            console.print(f"[red]{aid}[/]: " + ", ".join(problems[:8]))
        if stale:
            raise GraderError("assignments/ is out of date: run `make assignments`")
        console.print("assignments/ is up to date")
        return
    for aid, count in stubs.write_all(course).items():
        console.print(f"{aid}: {count} files written")


@click.command()
@click.option("--quick", is_flag=True, help="skip the invariants that need grading")
@sandbox_option
@click.argument("ids", nargs=-1)
@click.pass_obj
def check(course: Course, quick: bool, sandbox: str, ids: tuple[str, ...]) -> None:
    """Check the course invariants (reference earns all, stub earns none, stubs in sync, no leaks)."""
    failures = invariants.check_all(course=course, ids=list(ids) or None, grade=not quick, sandbox=sandbox,
                                    say=console.print)
    if failures:
        raise GraderError(f"{len(failures)} invariant(s) broken: " + "; ".join(failures))
    console.print("[green]all course invariants hold[/]")


@click.command()
@click.pass_obj
def handouts(course: Course) -> None:
    """Regenerate each handout's grading section (points, perf credit rule, bars) from the spec and tests."""
    from autograder.authoring.handout import current_handout

    if not course.has_solutions:
        raise GraderError("no solutions/ in this checkout: handouts are generated in the instructor tree")
    for aid in course.ids():
        path, text, regenerated = current_handout(course, aid)
        if regenerated != text:
            path.write_text(regenerated)
        console.print(f"{aid}: {'updated' if regenerated != text else 'up to date'}; run `make assignments` next")


@click.command()
@click.argument("aid")
@sandbox_option
@click.option("--gpu-only", is_flag=True, help="only the mutants marked gpu = true")
@click.option("--record", is_flag=True, help="where every variant graded here lost points, write "
              "solutions/<id>/mutants.lock, which `make test` checks before grading them again")
@click.pass_obj
def mutants(course: Course, aid: str, sandbox: str, gpu_only: bool, record: bool) -> None:
    """Grade every broken variant in mutants.toml; each must lose points. AID `all`: every assignment."""
    from autograder.authoring.mutants import grade_mutants
    from autograder.authoring.variant_record import write_record

    failed = []
    for one in course.ids() if aid == "all" else [aid]:
        outcomes = grade_mutants(course=course, assignment_id=one, sandbox=sandbox, say=console.print,
                                 gpu_only=gpu_only)
        survivors = [o.name for o in outcomes if o.graded_here and not o.caught]
        if not_run := [o.name for o in outcomes if not o.graded_here]:
            console.print(f"{one}: not run here (need a GPU): {', '.join(not_run)}; grade them on a GPU with --gpu-only")
        if survivors:
            failed.append(f"{one}: {', '.join(survivors)}")
        elif record and not gpu_only and outcomes:
            path = write_record(course, one, [o.name for o in outcomes if o.graded_here])
            console.print(f"{one}: every variant graded here lost points; recorded in {path}")
    if failed:
        raise GraderError("mutants that lost no points: " + "; ".join(failed))


@click.command()
@click.argument("ids", nargs=-1)
@click.pass_obj
def tasks(course: Course, ids: tuple[str, ...]) -> None:
    """Measure which public tests reach each task of the reference (coverage.py over the solution
    regions) into solutions/<id>/tasks.toml. No id or `all`: every assignment."""
    from autograder.authoring.taskmap import write_tasks

    targets = course.ids() if not ids or ids == ("all",) else list(ids)
    failed = []
    for n, aid in enumerate(targets, 1):
        console.rule(f"{aid} ({n}/{len(targets)})")
        try:
            record = write_tasks(course=course, assignment_id=aid,
                                 say=lambda line: console.print(escape(line), highlight=False, soft_wrap=True))
        except GraderError as e:  # one assignment's failure leaves the others' records to be written
            console.print(f"[red]{aid}: {escape(str(e))}[/]", highlight=False, soft_wrap=True)
            failed.append(aid)
            continue
        missing = ", ".join(f"{t.id} ({t.function})" for t in record.unreached() if not t.reason.strip())
        console.print(f"{aid}: {len(record.tasks) - len(record.unreached())} of {len(record.tasks)} tasks reached by a "
                      "public test" + (f"; [yellow]no test and no reason[/] for {escape(missing)}" if missing else ""),
                      highlight=False, soft_wrap=True)
    console.print("next: `python -m autograder handouts`, then `python -m autograder stubs` (`make tasks` runs both)",
                  soft_wrap=True)
    if failed:
        raise GraderError(f"no record written for {', '.join(failed)}")


@click.command()
@click.argument("aid")
@click.option("--max", "max_mutants", type=int, default=40, show_default=True, help="mutants graded (a seeded sample)")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the sample")
@click.option("--timeout", "timeout_s", type=float, default=None,
              help="seconds per mutant (default: 4x the unmutated copy's grading, at least 60)")
@sandbox_option
@click.pass_obj
def mutation(course: Course, aid: str, max_mutants: int, seed: int, timeout_s: float | None, sandbox: str) -> None:
    """Mechanical mutation testing of the reference's solution regions; survivors go to mutation.toml."""
    from autograder.authoring.mutation import REPORT, run_mutation

    summary, survivors = run_mutation(course=course, assignment_id=aid, max_mutants=max_mutants, seed=seed,
                                      timeout_s=timeout_s, sandbox=sandbox,
                                      say=lambda line: console.print(escape(line), highlight=False, soft_wrap=True))
    console.print(f"{aid}: kill rate {summary['kill_rate']:.0%} ({summary['killed']} killed, "
                  f"{summary['survived']} survived, {summary['errors']} errors of {summary['graded']}); "
                  f"{len(survivors)} survivor(s) to review in solutions/{aid}/{REPORT}", highlight=False, soft_wrap=True)


@click.command()
@click.argument("aid")
@click.option("--repeats", type=int, default=1, show_default=True, help="grade the reference this many times")
@click.option("--pass-factor", type=float, default=0.6, show_default=True)
@click.option("--full-factor", type=float, default=0.9, show_default=True)
@click.option("--write", is_flag=True, help="write the proposed bars into solutions/<id>/assignment.toml")
@click.option("--perf-only", is_flag=True, help="grade only the files that hold perf tests")
@sandbox_option
@click.option("--json", "json_path", type=click.Path(), default=None, help="results.json of the last grading run")
@click.pass_obj
def calibrate(course: Course, aid: str, repeats: int, pass_factor: float, full_factor: float, write: bool,
              perf_only: bool, sandbox: str, json_path: str | None) -> None:
    """Measure the reference's perf metrics here and propose (or write) bars for this hardware."""
    from autograder.authoring.calibrate import calibrate as run_calibration

    run_calibration(course=course, assignment_id=aid, repeats=repeats, pass_factor=pass_factor,
                    full_factor=full_factor, write=write, sandbox=sandbox, say=console.print,
                    json_path=Path(json_path) if json_path else None, perf_only=perf_only)


@click.command()
@click.pass_obj
def schedule(course: Course) -> None:
    """Validate course/schedule.toml and print the weeks."""
    from autograder.authoring.schedule import load_schedule

    plan = load_schedule(course.root / "course" / "schedule.toml", course.ids(),
                         specs={aid: course.spec(aid) for aid in course.ids()})
    for week in plan.weeks:
        console.print(f"week {week.number}: {week.release:%Y-%m-%d} -> due {week.due:%Y-%m-%d %H:%M} UTC  "
                      + ", ".join(week.assignments))
    from autograder.classroom.late import load_policy

    late = load_policy(course)
    console.print(f"late: {late.grace_minutes:g} min grace, -{late.penalty_per_day:.0%} per day late, "
                  + (f"no credit after {late.max_days} days" if late.max_days is not None else "no limit"))


@click.command()
@click.option("--week", type=int, required=True, help="release the assignments of weeks 1..WEEK")
@click.option("--out", type=click.Path(), required=True, help="a new folder for the student release")
@click.option("--repo", type=click.Path(), default=None,
              help="also commit the release as the next commit of this student repository (created if new)")
@click.pass_obj
def release(course: Course, week: int, out: str, repo: str | None) -> None:
    """Build the student release of weeks 1..N (no solutions, no hidden tests)."""
    from autograder.authoring.release import build_release, publish

    ids = build_release(course=course, week=week, out=Path(out))
    console.print(f"released {', '.join(ids)} into {out}")
    if repo:
        commit = publish(Path(out), Path(repo), week)
        console.print(f"committed week {week} to {repo} ({commit[:12]}): students merge it with `git pull`")


COMMANDS = (stubs_cmd, check, handouts, mutants, tasks, mutation, calibrate, schedule, release)
