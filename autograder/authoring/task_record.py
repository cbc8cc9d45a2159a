"""The record of which public tests reach each task (`solutions/<id>/tasks.toml`), written by
`autograder tasks` (authoring/taskmap.py measures it) and checked by `make test` in seconds.

Its fingerprint covers what decides the measurement: the reference package, the public tests and
the Python files beside them that they load (the conftest, helpers it or the tests import). Given
packages, scripts no test imports and the grader are left out on purpose: they change which lines
run only by accident, and were they in, a change to an earlier assignment (or to a bench script)
would send later records back to a measurement of minutes.
"""

from __future__ import annotations

import ast
import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from autograder.authoring.stubs import Task, stub_task_ids
from autograder.host.course_files import course_files
from autograder.errors import GraderError
from autograder.host.render import given_packages, render_release
from autograder.host.repo import Course

RECORD = "tasks.toml"
HEADER = """\
# Which public tests reach each task of the reference (`make tasks A={id}`): the public tests graded
# the reference as `make grade` grades a student's copy, under coverage.py, and a task is reached by a
# test whose run entered its solution region. reached_by: public test file -> how many of its tests
# did (0: only the file's fixtures and set-up did). `make test` fails once the package or the public
# tests change (run `make tasks A={id}` again), and while a task no public test reaches has no reason.
# A reason is written here by hand, only for a task no public test can reach on a CPU; a rerun keeps it.
"""


@dataclass(frozen=True)
class TaskEntry:
    """One task as recorded: where it is, the public test files that reach it, and why none can."""

    id: str
    file: str
    function: str
    reached_by: dict[str, int] = field(default_factory=dict)
    reason: str = ""


@dataclass(frozen=True)
class TaskRecord:
    assignment: str
    fingerprint: str
    tool: str
    hardware: str
    files: dict[str, dict[str, int]]  # public test file -> {"run": n, "not_run": m}
    tasks: list[TaskEntry]

    def unreached(self) -> list[TaskEntry]:
        return [t for t in self.tasks if not t.reached_by]


def _imported(paths: list[Path]) -> set[str]:
    """Top-level module names the given Python files import."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names


def _measured_inputs(course: Course, assignment_id: str) -> list[Path]:
    """The package, tests/, the conftest and the modules beside them that those import (a bench
    script no test imports cannot change which tasks the tests reach)."""
    spec, solution = course.spec(assignment_id), course.solution_dir(assignment_id)
    files = course_files(solution)
    tests = [solution / rel for rel in files if rel.parts[0] == "tests" and rel.suffix == ".py"]
    beside = {"conftest"} | _imported(tests + [p for p in [solution / "conftest.py"] if p.is_file()])
    return [rel for rel in files if rel.parts[0] in (spec.package, "tests")
            or (len(rel.parts) == 1 and rel.suffix == ".py" and rel.stem in beside)]


def fingerprint(course: Course, assignment_id: str) -> str:
    """sha256 over the reference package, the public tests and the Python files they load beside them."""
    solution = course.solution_dir(assignment_id)
    h = hashlib.sha256(b"autograder-tasks-v1")
    for rel in _measured_inputs(course, assignment_id):
        h.update(rel.as_posix().encode() + b"\0" + (solution / rel).read_bytes() + b"\0")
    return h.hexdigest()


def _str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def render(record: TaskRecord) -> str:
    out = [HEADER.format(id=record.assignment), "[summary]", f"assignment = {_str(record.assignment)}",
           f"fingerprint = {_str(record.fingerprint)}", f"tool = {_str(record.tool)}",
           f"hardware = {_str(record.hardware)}", f"tasks = {len(record.tasks)}",
           f"unreached = {len(record.unreached())}", "", "[files]  # public test file -> its tests run on this machine, and those it could not run (GPU)"]
    out += [f"{_str(f)} = {{ run = {c['run']}, not_run = {c['not_run']} }}" for f, c in sorted(record.files.items())]
    for t in record.tasks:
        reached = ", ".join(f"{_str(f)} = {n}" for f, n in sorted(t.reached_by.items()))
        out += ["", "[[task]]", f"id = {_str(t.id)}", f"file = {_str(t.file)}", f"function = {_str(t.function)}",
                f"reached_by = {{ {reached} }}" if reached else "reached_by = {}"]
        if not t.reached_by:
            out.append(f"reason = {_str(t.reason)}")
    return "\n".join(out) + "\n"


def load(path: Path) -> TaskRecord | None:
    """The record at `path`, None where there is none; GraderError when it cannot be read."""
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text())
        summary = data["summary"]
        tasks = [TaskEntry(str(t["id"]), str(t["file"]), str(t["function"]),
                           {str(f): int(n) for f, n in t["reached_by"].items()}, str(t.get("reason", "")))
                 for t in data.get("task", [])]
        files = {str(f): {"run": int(c["run"]), "not_run": int(c["not_run"])} for f, c in data["files"].items()}
        return TaskRecord(str(summary["assignment"]), str(summary["fingerprint"]), str(summary["tool"]),
                          str(summary["hardware"]), files, tasks)
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise GraderError(f"{path}: malformed ({e}); fix it by hand so no reason is lost") from None


def read_record(course: Course, assignment_id: str) -> TaskRecord | None:
    return load(course.solution_dir(assignment_id) / RECORD)


def keep_reasons(previous: TaskRecord | None, tasks: list[TaskEntry]) -> list[TaskEntry]:
    """The new entries, each unreached one with the reason written for the same task before
    (matched by file and function, then by how many regions of that function came before it)."""
    def keyed(entries: list[TaskEntry]) -> dict[tuple[str, str, int], TaskEntry]:
        seen: dict[tuple[str, str], int] = {}
        out = {}
        for t in entries:
            n = seen[(t.file, t.function)] = seen.get((t.file, t.function), -1) + 1
            out[(t.file, t.function, n)] = t
        return out

    reasons = {k: t.reason for k, t in keyed(previous.tasks if previous else []).items() if t.reason}
    return [TaskEntry(t.id, t.file, t.function, t.reached_by, "" if t.reached_by else reasons.get(k, ""))
            for k, t in keyed(tasks).items()]


def check(course: Course, assignment_id: str) -> list[str]:
    """What is wrong with the assignment's record (empty: current, complete, every task reached or excused)."""
    again = f"run `make tasks A={assignment_id}`"
    try:
        record = read_record(course, assignment_id)
    except GraderError as e:
        return [str(e)]
    if record is None:
        return [f"{assignment_id}: no {RECORD}; {again}"]
    if record.fingerprint != fingerprint(course, assignment_id):
        return [f"{assignment_id}: the package or the public tests changed since {RECORD} was written; {again}"]
    spec = course.spec(assignment_id)
    release = render_release(course.solution_dir(assignment_id), spec.task_prefix, given_packages(course, spec))
    stubs = stub_task_ids(release)
    if [(t.id, t.function) for t in record.tasks] != stubs:
        return [f"{assignment_id}: {RECORD} lists other task ids than the stubs raise; {again}"]
    return [f"{assignment_id}: no public test reaches {t.id} ({t.file}: {t.function}); add a public test that "
            f"runs it, or write in {RECORD} why none can on a CPU (reason = \"...\")"
            for t in record.unreached() if not t.reason.strip()]


def entries(tasks: list[Task], reached: dict[str, dict[str, set[str]]]) -> list[TaskEntry]:
    """The record's entries from a measurement: per file, the tests that reached the task."""
    return [TaskEntry(t.id, t.file, t.function,
                      {f: len(ids - {""}) for f, ids in reached.get(t.id, {}).items()}) for t in tasks]
