"""The record of the last full grading of an assignment's broken variants (`solutions/<id>/mutants.lock`).

`make variants` grades every broken variant of mutants.toml and, when each one lost points, writes
the digest of everything those gradings depended on and the names it graded. `make test` grades the
variants again only where that record is stale: a change to the package, the tests (public or
hidden), the conftest, the spec, the answers, mutants.toml, a given package or the course data
makes it stale; a change to the handout, to a record file or to a GPU's perf bars does not (the
variants are graded on the CPU, where no GPU bar is read, so `calibrate --write` on a GPU runner
leaves the record fresh).

The grader's own code is left out of the digest on purpose: the variants check an assignment's
tests, and the grader is checked by its own tests (and, on every run of `make test`, by each
reference earning every point and each stub none). Were it in, every change to the grader would
re-grade every variant in CI, a quarter of an hour on two cores.
"""

from __future__ import annotations

import datetime
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from autograder.host.course_files import course_files
from autograder.host.render import given_packages
from autograder.host.repo import Course

RECORD = "mutants.lock"
SPEC = "assignment.toml"
# Files of an assignment that no grading reads: prose, pictures, and records written about it.
NOT_GRADED_ON = frozenset({"README.md", RECORD, "mutation.toml", "tasks.toml"})
NOT_GRADED_SUFFIXES = frozenset({".png"})


@dataclass(frozen=True)
class VariantRecord:
    """What the last full grading of the broken variants proved, and against which files."""

    fingerprint: str
    caught: tuple[str, ...]
    date: str


def _graded_on(rel: Path) -> bool:
    return rel.as_posix() not in NOT_GRADED_ON and rel.suffix not in NOT_GRADED_SUFFIXES


def _without_gpu_bars(text: str) -> str:
    """assignment.toml's text less the rows of GPU tags in its [perf.<metric>.thresholds] tables."""
    kept, in_bars = [], False
    for row in text.splitlines(keepends=True):
        if row.lstrip().startswith("["):
            in_bars = bool(re.fullmatch(r"\[perf\.[^\]]+\.thresholds\]", row.strip()))
        elif in_bars and (key := re.match(r"\s*([\w-]+)\s*=", row)) and key.group(1) != "cpu":
            continue
        kept.append(row)
    return "".join(kept)


def _graded_bytes(rel: Path, path: Path) -> bytes:
    if rel.as_posix() == SPEC:
        return _without_gpu_bars(path.read_text()).encode()
    return path.read_bytes()


def fingerprint(course: Course, assignment_id: str) -> str:
    """sha256 over the assignment's graded files, its given packages and the course data package."""
    solution_dir = course.solution_dir(assignment_id)
    coursedata = course.root / "coursedata"
    files = [*((f"{assignment_id}/{rel.as_posix()}", _graded_bytes(rel, solution_dir / rel))
               for rel in course_files(solution_dir) if _graded_on(rel)),
             *((f"coursedata/{rel.as_posix()}", (coursedata / rel).read_bytes()) for rel in course_files(coursedata)),
             *((f"given/{path.as_posix()}", data)
               for path, data in sorted(given_packages(course, course.spec(assignment_id)).items()))]
    h = hashlib.sha256(b"autograder-variants-v1")
    for name, data in files:  # name NUL bytes NUL: no two file lists hash alike
        h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


def read_record(course: Course, assignment_id: str) -> VariantRecord | None:
    """The assignment's record, or None where it has none (or one this code cannot read)."""
    path = course.solution_dir(assignment_id) / RECORD
    try:
        data = tomllib.loads(path.read_text())
        return VariantRecord(str(data["fingerprint"]), tuple(str(n) for n in data["caught"]), str(data["date"]))
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError):
        return None


def stale_reason(course: Course, assignment_id: str, names: list[str]) -> str | None:
    """None when the record proves every variant in `names` caught against today's files; else why not."""
    record = read_record(course, assignment_id)
    if record is None:
        return f"no readable {RECORD}"
    if record.fingerprint != fingerprint(course, assignment_id):
        return "the assignment's files changed since the record was written"
    if missing := sorted(set(names) - set(record.caught)):
        return f"variants not in the record: {', '.join(missing)}"
    return None


def write_record(course: Course, assignment_id: str, caught: list[str]) -> Path:
    """Record that every variant in `caught` lost points against today's files."""
    path = course.solution_dir(assignment_id) / RECORD
    names = ",\n".join(f'    "{n}"' for n in sorted(caught))
    path.write_text(
        f"# Written by `make variants` (autograder mutants --record): each broken variant below was\n"
        f"# graded here and lost points. `make test` grades them again only when `fingerprint` (the\n"
        f"# files those gradings read, see autograder/authoring/variant_record.py) changes.\n"
        f'fingerprint = "{fingerprint(course, assignment_id)}"\n'
        f'date = "{datetime.date.today().isoformat()}"\n'
        f"caught = [\n{names},\n]\n")
    return path
