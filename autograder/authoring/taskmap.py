"""Which public tests reach which task: the public tests grade the reference as `make grade` grades
a student's copy, under coverage.py, and the lines they run are mapped onto the solution regions.

One grading per public test file, each with that file as coverage's static context: the package
runs in worker processes (and the ranks of multi-rank tests), where a test's fixtures run before
the judge names the test, so only a run of its own ties fixture work to its file. Inside a run,
`coverage_context` names the test whose call each request serves. A region is reached by a test
(or a file) when coverage saw any line strictly between its markers run. Triton kernels run under
TRITON_INTERPRET=1 on a CPU, as Python functions of their own files: coverage sees their lines too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from autograder.authoring import task_record
from autograder.authoring.stubs import Task, solution_tasks
from autograder.authoring.task_record import TaskRecord
from autograder.hardware import hardware_tag
from autograder.errors import GraderError
from autograder.host.grade import expected_tests, grade_assignment
from autograder.host.repo import Course
from autograder.host.results import NOT_GRADED, PASSED

PUBLIC = "tests/"
PLUGIN = "autograder.authoring.coverage_context"


@dataclass
class FileRun:
    """One public test file graded on the reference: the tests run here, and those that failed."""

    file: str
    ran: int = 0
    failed: list[str] = field(default_factory=list)
    not_graded: int = 0  # tests this machine cannot run (a GPU test on a CPU)
    seconds: float = 0.0


@dataclass
class TaskMap:
    """For every task: per public test file, the tests whose call entered its region ("" stands for
    the file's fixtures and set-up, outside any test's call)."""

    assignment: str
    tasks: list[Task]
    runs: list[FileRun]
    reached: dict[str, dict[str, set[str]]]  # task id -> test file -> node ids


def region_lines(task: Task) -> range:
    """1-based numbers of the lines strictly between the region's BEGIN and END markers."""
    return range(task.region.begin + 2, task.region.end + 1)


def coverage_rc(data_file: Path, files: list[str], context: str) -> str:
    """coverage.py's configuration for one run: only the files with regions, one data file per process."""
    include = "".join(f"\n    */{rel}" for rel in files)
    return (f"[run]\ndata_file = {data_file}\nparallel = true\ncontext = {context}\n"
            f"plugins = {PLUGIN}\ninclude ={include}\n")


@contextmanager
def _measured(rc: Path) -> Iterator[None]:
    """Every Python process the grading starts measures itself (coverage's .pth file reads this;
    the grader passes it into the run's environment)."""
    before = os.environ.get("COVERAGE_PROCESS_START")
    os.environ["COVERAGE_PROCESS_START"] = str(rc)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COVERAGE_PROCESS_START", None)
        else:
            os.environ["COVERAGE_PROCESS_START"] = before


def _check_startup_hook() -> None:
    from importlib.metadata import PackageNotFoundError, files

    try:
        hooks = [f for f in files("coverage") or [] if f.name.endswith(".pth")]
    except PackageNotFoundError:
        hooks = []
    if not hooks:
        raise GraderError("`autograder tasks` needs coverage>=7.17 (its .pth file measures the worker "
                          "processes): `make setup` installs it")


def _new_dir() -> Path:
    """A folder every uid can write: as root, the sandbox runs the tests under a uid of its own."""
    folder = Path(tempfile.mkdtemp(prefix="taskmap-"))
    folder.chmod(0o1777)
    return folder


def _contexts(folder: Path, files: list[str]) -> dict[tuple[str, int], set[str]]:
    """{(file with regions, line): the contexts it ran in}, over every process's data file."""
    from coverage import CoverageData

    seen: dict[tuple[str, int], set[str]] = {}
    for part in sorted(folder.glob(".coverage.*")):
        data = CoverageData(basename=str(part))
        data.read()
        for measured in data.measured_files():
            rel = max((f for f in files if measured.endswith("/" + f)), key=len, default=None)
            for line, contexts in data.contexts_by_lineno(measured).items() if rel else ():
                seen.setdefault((rel, line), set()).update(contexts)
    return seen


def run_file(course: Course, assignment_id: str, test_file: str,
             tasks: list[Task]) -> tuple[FileRun, dict[tuple[str, int], set[str]]]:
    """Grade one public test file on the reference under coverage: (its run, what ran in which context)."""
    files = sorted({t.file for t in tasks})
    folder = _new_dir()
    run = FileRun(test_file)
    try:
        rc = folder / "coveragerc"
        rc.write_text(coverage_rc(folder / ".coverage", files, test_file))
        rc.chmod(0o644)
        start = time.monotonic()
        with _measured(rc), warnings.catch_warnings():
            # the reference is trusted: which uid runs it under the `none` sandbox does not matter here
            warnings.filterwarnings("ignore", message="the Python interpreter is not reachable")
            result = grade_assignment(course=course, assignment_id=assignment_id, solution=True, sandbox="none",
                                      only_files=[test_file], jobs=1, probe=False)
        run.seconds = time.monotonic() - start
        run.ran = sum(t.status != NOT_GRADED for t in result.tests)
        run.not_graded = len(result.tests) - run.ran
        run.failed = [t.test.nodeid for t in result.tests if t.status not in (PASSED, NOT_GRADED)]
        return run, _contexts(folder, files)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _test_of(context: str, test_file: str) -> str | None:
    """The node id in a context label "<file>|<node id>" ("" for the file's set-up), None if another file's."""
    static, _, nodeid = context.partition("|")
    return nodeid if static == test_file else None


def build_map(*, course: Course, assignment_id: str, say: Callable[[str], None] = print) -> TaskMap:
    """Grade every public test file of the reference under coverage and map the lines onto the tasks."""
    _check_startup_hook()
    spec, solution = course.spec(assignment_id), course.solution_dir(assignment_id)
    if solution is None:
        raise GraderError(f"`autograder tasks` measures the reference: solutions/{assignment_id} is missing")
    tasks = solution_tasks(solution, spec.task_prefix)
    # collected before measuring (then cached): the collection run is no test's
    files = sorted({t.file for t in expected_tests(course, assignment_id) if t.file.startswith(PUBLIC)})
    taskmap = TaskMap(assignment_id, tasks, [], {})
    for n, test_file in enumerate(files, 1):
        run, seen = run_file(course, assignment_id, test_file, tasks)
        taskmap.runs.append(run)
        for task in tasks:
            for line in region_lines(task):
                for context in seen.get((task.file, line), ()):
                    if (nodeid := _test_of(context, test_file)) is not None:
                        taskmap.reached.setdefault(task.id, {}).setdefault(test_file, set()).add(nodeid)
        reached = sum(test_file in taskmap.reached.get(t.id, {}) for t in tasks)
        failed = f", {len(run.failed)} FAILED on the reference" if run.failed else ""
        say(f"{assignment_id} [{n}/{len(files)}] {test_file}: {run.ran} tests run{failed}, "
            f"{reached} of {len(tasks)} tasks reached ({run.seconds:.0f} s)")
    if tasks and not taskmap.reached and any(run.ran for run in taskmap.runs):
        raise GraderError("coverage saw no line of the package run: is coverage>=7.17 installed (its .pth file "
                          "starts it in the worker processes) and COVERAGE_PROCESS_START passed into the run?")
    return taskmap


def write_tasks(*, course: Course, assignment_id: str, say: Callable[[str], None] = print) -> TaskRecord:
    """Measure the assignment and write solutions/<id>/tasks.toml, keeping the reasons written there."""
    from importlib.metadata import version

    fingerprint = task_record.fingerprint(course, assignment_id)  # of the files as the measurement began
    taskmap = build_map(course=course, assignment_id=assignment_id, say=say)
    if failed := [nodeid for run in taskmap.runs for nodeid in run.failed]:
        raise GraderError(f"{assignment_id}: the reference fails public tests, so what they reach says little: "
                          + ", ".join(failed[:5]))
    path = course.solution_dir(assignment_id) / task_record.RECORD
    previous = task_record.load(path)
    record = TaskRecord(assignment_id, fingerprint, f"coverage {version('coverage')}", hardware_tag(),
                        {r.file: {"run": r.ran, "not_run": r.not_graded} for r in taskmap.runs},
                        task_record.keep_reasons(previous, task_record.entries(taskmap.tasks, taskmap.reached)))
    path.write_text(task_record.render(record))
    return record
