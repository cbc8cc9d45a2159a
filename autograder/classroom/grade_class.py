"""Grade a whole class: every submission in a folder, in parallel, into the gradebook.

Resumable by construction: the gradebook is the record, and a grading is committed (in one
transaction, by this process alone) only once it finished and its results file was written
atomically. A rerun skips every submission whose (student, assignment, submission hash, grader
version) is recorded, unless `regrade`; so a kill at any moment loses no recorded grade and counts
none twice. A grading that crashed is reported and left unrecorded: the next run retries it.
Where the gradings run (this machine's processes, or a Ray cluster) is the engine's business
(`engines`); recording them is this module's, whichever engine ran them.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from autograder.classroom.discover import Located, list_entries, locate, safe_name
from autograder.classroom.engines import ENGINES, Engine, make_engine
from autograder.classroom.gradebook import GRADED, Gradebook, GradeKey, GradeRecord, Late, Outcome
from autograder.classroom.late import LatePolicy, assess, due_date, git_commit_time, load_policy, read_times
from autograder.errors import GraderError
from autograder.host import atomic
from autograder.host.fingerprint import grader_version, submission_hash, tree_hash
from autograder.host.repo import Course
from autograder.host.spec import AssignmentSpec
from autograder.host.submission import grade_submission, write_results

GRADEBOOK = "gradebook.sqlite"
Say = Callable[[str], None]


@dataclass(frozen=True)
class ClassOptions:
    jobs: int = 2              # gradings at once (each starts its own sandboxed worker processes)
    sandbox: str = "auto"
    hardware: str | None = None
    regrade: bool = False      # grade again what the gradebook already holds
    times: Path | None = None  # CSV of student,submitted_at
    engine: str = "local"      # where gradings run: this machine's processes, or a Ray cluster
    ray_address: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.jobs, int) or self.jobs < 1:
            raise ValueError(f"jobs must be a whole number >= 1, got {self.jobs!r}")
        if self.times is not None and not self.times.is_file():
            raise ValueError(f"--times {self.times}: no such file")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.ray_address is not None and self.engine != "ray":
            raise ValueError("--ray-address is for --engine ray")

    def make_engine(self) -> Engine:
        # A grading for a GPU hardware tag asks the engine for a GPU, so a cluster places it on a GPU node.
        gpus = 0 if self.hardware in (None, "cpu") else 1
        return make_engine(engine=self.engine, jobs=self.jobs, ray_address=self.ray_address, gpus=gpus)


@dataclass
class ClassSummary:
    graded: list[str] = field(default_factory=list)     # graded and recorded by this run
    kept: list[str] = field(default_factory=list)       # already recorded, not graded again
    problems: list[Located] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (student, why): not recorded, retried next run
    ignored: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Task:
    """One grading, as sent to a worker: a process here or a Ray task on any node (plain, picklable
    data; paths, which on a cluster name the same files on shared storage)."""

    course_root: Path
    key: GradeKey
    root: Path
    results_path: Path
    sandbox: str
    hardware: str | None


@dataclass(frozen=True)
class _Done:
    score: float
    max_score: float
    hardware: str
    outcomes: list[Outcome]


def _grade_in_worker(task: _Task) -> _Done:
    """Grade one submission and write its results file (atomically); runs in a worker process."""
    course = Course(task.course_root)
    grading = grade_submission(course, task.key.assignment, submission=task.root, sandbox=task.sandbox,
                               hardware=task.hardware, jobs=1, student=task.key.student,
                               identity=(task.key.submission_hash, task.key.grader_version))
    write_results(task.results_path, [grading])
    result = grading.result
    outcomes = [Outcome.of(t) for t in result.tests]
    return _Done(round(result.score, 4), round(result.max_score, 4), result.hardware, outcomes)


@contextmanager
def _locked(out: Path) -> Iterator[None]:
    """One grade-class per output folder at a time (the kernel drops the lock if we are killed)."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GraderError(f"another grade-class is writing {out}: wait for it to finish") from None
        yield


def _late(loc: Located, policy: LatePolicy, due: dt.datetime | None, times: dict[str, dt.datetime]) -> Late:
    entry = loc.entry
    submitted = times.get(loc.student)
    if submitted is None and not entry.archive:
        submitted = git_commit_time(loc.root or entry.path, entry.path)
    lateness = assess(policy, due, submitted)
    stamp = lateness.submitted_at.isoformat() if lateness.submitted_at else None
    return Late(stamp, lateness.days_late, lateness.penalty, lateness.note)


@dataclass(frozen=True)
class _Plan:
    """What every submission of one class grading shares."""

    course: Course
    spec: AssignmentSpec
    version: str
    policy: LatePolicy
    due: dt.datetime | None
    times: dict[str, dt.datetime]
    results_dir: Path
    options: ClassOptions


def grade_class(*, course: Course, assignment_id: str, folder: Path, out: Path, options: ClassOptions,
                say: Say = print) -> ClassSummary:
    """Grade every submission in `folder` into the gradebook `out`/gradebook.sqlite; results files
    go to `out`/<assignment>/results/<student>.json."""
    if not folder.is_dir():
        raise GraderError(f"the class folder {folder} does not exist (or is not a folder)")
    times = {safe_name(s): t for s, t in read_times(options.times).items()} if options.times else {}
    plan = _Plan(course, course.spec(assignment_id), grader_version(course, assignment_id), load_policy(course),
                 due_date(course, assignment_id), times, out / assignment_id / "results", options)
    work = out / assignment_id / ".unpacked"  # under `out`: on a cluster, shared with the workers too
    engine = options.make_engine()  # before any work: a missing engine is refused at once
    summary = ClassSummary()
    with _locked(out), Gradebook(out / GRADEBOOK) as book:
        atomic.remove_partials(plan.results_dir)  # what a killed run may have left half-written
        shutil.rmtree(work, ignore_errors=True)
        entries, doubles, summary.ignored = list_entries(folder)
        located = [locate(e, plan.spec.package, work) for e in entries] + doubles
        todo = [task for loc in located if (task := _triage(loc, plan, book, summary))]
        say(f"{assignment_id}: {len(todo)} to grade, {len(summary.kept)} already recorded, "
            f"{len(summary.problems)} not gradable")
        _run(todo, engine, book, out, summary, say)
        shutil.rmtree(work, ignore_errors=True)
    return summary


def _triage(loc: Located, plan: _Plan, book: Gradebook, summary: ClassSummary) -> tuple[_Task, Late] | None:
    """Record what needs no grading (not gradable, or already graded); the grading task otherwise."""
    late = _late(loc, plan.policy, plan.due, plan.times)
    aid = plan.spec.id
    if loc.problem or loc.root is None:
        key = GradeKey(loc.student, aid, tree_hash(loc.entry.path), plan.version)
        book.record(GradeRecord(key, loc.problem, note=loc.detail, late=late))
        summary.problems.append(loc)
        return None
    key = GradeKey(loc.student, aid, submission_hash(loc.root, plan.spec), plan.version)
    if book.has_grade(key) and not plan.options.regrade:
        book.keep(key, late)
        summary.kept.append(loc.student)
        return None
    task = _Task(plan.course.root, key, loc.root, plan.results_dir / f"{loc.student}.json", plan.options.sandbox,
                 plan.options.hardware)
    return task, late


def _run(todo: list[tuple[_Task, Late]], engine: Engine, book: Gradebook, out: Path, summary: ClassSummary,
         say: Say) -> None:
    """Grade `todo` on `engine`; record each grading as soon as it finished (this process only)."""
    lates = {task.key: late for task, late in todo}  # one task per student, so keys are unique
    for task, result in engine.run(_grade_in_worker, [task for task, _ in todo]):
        _settle(task, result, lates[task.key], book, out, summary)
        n = len(summary.graded) + len(summary.failed)
        say(f"[{n}/{len(todo)}] {task.key.student}: {_said(result)}")


def _settle(task: _Task, result: _Done | BaseException, late: Late, book: Gradebook, out: Path,
            summary: ClassSummary) -> None:
    if isinstance(result, BaseException):
        summary.failed.append((task.key.student, f"{type(result).__name__}: {result}"))
        return
    book.record(GradeRecord(task.key, GRADED, result.score, result.max_score,
                            os.path.relpath(task.results_path, out), result.hardware, late=late,
                            outcomes=result.outcomes))
    summary.graded.append(task.key.student)


def _said(result: _Done | BaseException) -> str:
    if isinstance(result, BaseException):
        return f"grading failed, not recorded ({result})"
    return f"{result.score:g}/{result.max_score:g}"
