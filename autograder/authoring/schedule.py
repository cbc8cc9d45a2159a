"""The course calendar: `course/schedule.toml` (weeks -> assignment ids, release and due dates)."""

from __future__ import annotations

import datetime as dt
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autograder.errors import GraderError
from autograder.host.spec import AssignmentSpec


@dataclass(frozen=True)
class Week:
    number: int
    release: dt.datetime
    due: dt.datetime
    assignments: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.due <= self.release:
            raise ValueError(f"week {self.number}: due {self.due:%Y-%m-%d %H:%M} is not after release "
                             f"{self.release:%Y-%m-%d %H:%M}")
        if not self.assignments:
            raise ValueError(f"week {self.number}: lists no assignment")


@dataclass(frozen=True)
class Schedule:
    title: str
    weeks: tuple[Week, ...]

    def released_by(self, week: int) -> list[str]:
        """Assignment ids released in weeks 1..week, in schedule order."""
        return [aid for w in self.weeks if w.number <= week for aid in w.assignments]

    def week_of(self, assignment_id: str) -> Week | None:
        return next((w for w in self.weeks if assignment_id in w.assignments), None)

    def check_given(self, specs: Mapping[str, AssignmentSpec]) -> None:
        """A file or package that answers an earlier exercise ([[given]] of assignment.toml) is
        released only after that exercise is due: its assignment's release date must not precede
        the due date."""
        for aid, spec in specs.items():
            week = self.week_of(aid)
            for given in spec.given:
                if given.solves not in specs:
                    raise ValueError(f"{aid}: [[given]] {given.name} solves unknown assignment {given.solves!r}")
                source = self.week_of(given.solves)
                if week is None:
                    continue
                if source is None:
                    raise ValueError(f"{aid} (week {week.number}) gives {given.name}, the answer to "
                                     f"{given.solves}, which is not scheduled: schedule {given.solves} first")
                if week.release < source.due:
                    raise ValueError(f"{aid} (week {week.number}, released {week.release:%Y-%m-%d}) gives "
                                     f"{given.name}, the answer to {given.solves}, before {given.solves} is due "
                                     f"({source.due:%Y-%m-%d %H:%M} UTC): release {aid} later")


def _as_datetime(value: object, where: str) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    raise ValueError(f"{where}: expected a TOML date or date-time, got {value!r}")


def parse_schedule(data: dict, known_ids: list[str]) -> Schedule:
    """Validate weeks (numbered 1, 2, ... in order, dates increasing) and that every id exists."""
    weeks, seen = [], set()
    for index, table in enumerate(data.get("week", []), 1):
        where = f"[[week]] #{index}"
        if table.get("number") != index:
            raise ValueError(f"{where}: number must be {index} (weeks are numbered 1, 2, ... in order)")
        ids = tuple(table.get("assignments", ()))
        for aid in ids:
            if aid not in known_ids:
                raise ValueError(f"{where}: unknown assignment {aid!r}; known: {', '.join(known_ids) or 'none'}")
            if aid in seen:
                raise ValueError(f"{where}: {aid!r} is scheduled twice")
            seen.add(aid)
        week = Week(index, _as_datetime(table.get("release"), f"{where}.release"),
                    _as_datetime(table.get("due"), f"{where}.due"), ids)
        if weeks and week.release < weeks[-1].release:
            raise ValueError(f"{where}: released before week {weeks[-1].number}")
        weeks.append(week)
    if not weeks:
        raise ValueError("no [[week]] tables")
    return Schedule(str(data.get("course", {}).get("title", "")), tuple(weeks))


def load_schedule(path: Path, known_ids: list[str], specs: Mapping[str, AssignmentSpec] | None = None) -> Schedule:
    """The validated schedule; with `specs`, also the release rule of given files (check_given)."""
    try:
        plan = parse_schedule(tomllib.loads(path.read_text()), known_ids)
        if specs is not None:
            plan.check_given(specs)
        return plan
    except FileNotFoundError:
        raise GraderError(f"{path}: no schedule file") from None
    except (tomllib.TOMLDecodeError, ValueError) as e:
        raise GraderError(f"{path}: {e}") from None
