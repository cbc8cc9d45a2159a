"""Late policy: due dates from `course/schedule.toml`, a penalty per day late, submission times.

The policy is the schedule's `[late]` table (all optional):

    [late]
    grace_minutes = 15      # late by less than this is on time (clock skew, a slow upload)
    penalty_per_day = 0.1   # fraction of the score lost per day or part of a day late
    max_days = 5            # later than this many days: no credit

A submission's time comes from the `--times` CSV (student,submitted_at in ISO 8601: an LMS's upload
time is the record) or else from the HEAD commit of the student's own git repository (a commit date
is the student's clock, so it only counts where nothing better is known). With neither, or with
no due date for the assignment, no penalty is applied and the gradebook says why.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from autograder.authoring.schedule import load_schedule
from autograder.errors import GraderError
from autograder.host.repo import Course

DAY = dt.timedelta(days=1)


@dataclass(frozen=True)
class LatePolicy:
    grace_minutes: float = 0.0
    penalty_per_day: float = 0.0
    max_days: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.grace_minutes, int | float) or self.grace_minutes < 0:
            raise ValueError(f"[late] grace_minutes must be a number >= 0, got {self.grace_minutes!r}")
        if not isinstance(self.penalty_per_day, int | float) or not 0 <= self.penalty_per_day <= 1:
            raise ValueError(f"[late] penalty_per_day must be a fraction in [0, 1], got {self.penalty_per_day!r}")
        if self.max_days is not None and (isinstance(self.max_days, bool) or not isinstance(self.max_days, int)
                                          or self.max_days < 0):
            raise ValueError(f"[late] max_days must be a whole number >= 0, got {self.max_days!r}")


@dataclass(frozen=True)
class Lateness:
    """How late one submission is, and what it costs (`penalty`: the fraction of the score lost)."""

    submitted_at: dt.datetime | None
    due: dt.datetime | None
    days_late: int
    penalty: float
    note: str  # "" when on time; otherwise said in the gradebook and the exports

    @property
    def flagged(self) -> bool:
        """No penalty could be decided (no time or no due date): an instructor should look."""
        return self.submitted_at is None or self.due is None


def parse_policy(table: dict) -> LatePolicy:
    unknown = set(table) - {"grace_minutes", "penalty_per_day", "max_days"}
    if unknown:
        raise ValueError(f"[late]: unknown key(s) {', '.join(sorted(unknown))}; "
                         "known: grace_minutes, penalty_per_day, max_days")
    return LatePolicy(**table)


def load_policy(course: Course) -> LatePolicy:
    """The `[late]` table of the course's schedule (no table, or no schedule: no penalty)."""
    path = course.root / "course" / "schedule.toml"
    if not path.is_file():
        return LatePolicy()
    try:
        return parse_policy(tomllib.loads(path.read_text()).get("late", {}))
    except (tomllib.TOMLDecodeError, ValueError, TypeError) as e:
        raise GraderError(f"{path}: {e}") from None


def due_date(course: Course, assignment_id: str) -> dt.datetime | None:
    """The due date of the schedule's week that lists the assignment (None: not scheduled)."""
    path = course.root / "course" / "schedule.toml"
    if not path.is_file():
        return None
    week = load_schedule(path, course.ids()).week_of(assignment_id)
    return week.due if week else None


def parse_time(text: str, where: str) -> dt.datetime:
    """An ISO 8601 time; one without a zone is UTC (as the schedule's dates are)."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise GraderError(f"{where}: {text!r} is not an ISO 8601 time (e.g. 2027-01-25T23:59:00Z)") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def read_times(path: Path) -> dict[str, dt.datetime]:
    """student -> submitted_at from a CSV with the columns `student,submitted_at`."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if rows and not {"student", "submitted_at"} <= set(rows[0]):
        raise GraderError(f"{path}: needs the columns student,submitted_at (found {', '.join(rows[0])})")
    return {row["student"].strip(): parse_time(row["submitted_at"], f"{path}, student {row['student']}")
            for row in rows if row.get("student", "").strip()}


def git_commit_time(folder: Path, owner: Path) -> dt.datetime | None:
    """The HEAD commit time of the git repository holding `folder`, if that repository lies within
    `owner` (the student's own folder: a class folder inside some other repository says nothing)."""
    def git(*args: str) -> str | None:
        run = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)
        return run.stdout.strip() if run.returncode == 0 else None

    try:
        top = git("rev-parse", "--show-toplevel")
    except OSError:  # no git on this machine
        return None
    if not top or not Path(top).resolve().is_relative_to(owner.resolve()):
        return None
    stamp = git("log", "-1", "--format=%cI", "HEAD")
    return parse_time(stamp, f"{folder}: git HEAD") if stamp else None


def assess(policy: LatePolicy, due: dt.datetime | None, submitted: dt.datetime | None) -> Lateness:
    """Days late (whole days, a started day counts) after the grace period, and the penalty."""
    if due is None:
        return Lateness(submitted, None, 0, 0.0, "no due date in the schedule: no late penalty")
    if submitted is None:
        return Lateness(None, due, 0, 0.0, "submission time unknown: no late penalty applied")
    late_by = submitted - due - dt.timedelta(minutes=policy.grace_minutes)
    if late_by <= dt.timedelta(0):
        return Lateness(submitted, due, 0, 0.0, "")
    days = math.ceil(late_by / DAY)
    if policy.max_days is not None and days > policy.max_days:
        return Lateness(submitted, due, days, 1.0, f"{days} days late, past the {policy.max_days}-day limit: no credit")
    penalty = min(1.0, days * policy.penalty_per_day)
    return Lateness(submitted, due, days, penalty, f"{days} day{'s' * (days != 1)} late: -{penalty:.0%}")
