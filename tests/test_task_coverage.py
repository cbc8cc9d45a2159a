"""Every task id is reached by a public test (tasks.toml, measured by `make tasks` with coverage.py
over the solution regions), and each handout says which tasks each public test file needs.

The course check reads the committed records only (seconds); the behaviour of the measurement is
checked on a small assignment of its own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.authoring import task_record
from autograder.authoring.handout import current_handout
from autograder.authoring.taskmap import write_tasks
from autograder.host.course_files import ignore
from autograder.host.repo import Course, find_root
from conftest import FIXTURES, MANIFEST_CACHE, add_assignment

COURSE = Course(find_root())


@pytest.mark.parametrize("aid", COURSE.ids())
def test_every_task_is_reached_by_a_public_test_or_has_a_reason(aid):
    assert task_record.check(COURSE, aid) == []


TOML = """[assignment]
id = "s00_reach"
title = "Which tasks the public tests reach"
stage = 0
package = "reach"
editable = ["reach/*.py"]

[limits]
test_timeout_s = 20
file_timeout_s = 60
memory_mb = 6144
"""

CODE = '''"""A public function over a helper, a set-up step, and a function no public test calls."""


def double(x: int) -> int:
    return _twice(x)  # no region here: the task is in the helper


def _twice(x: int) -> int:
    # BEGIN SOLUTION
    return 2 * x
    # END SOLUTION


def base() -> int:
    # BEGIN SOLUTION
    return 10
    # END SOLUTION


def never_called() -> int:
    # BEGIN SOLUTION
    return 0
    # END SOLUTION
'''

TESTS = '''import pytest

from reach import base, double


@pytest.fixture(scope="module")
def ten():
    return base()  # in the set-up, before the judge names a test to the worker


def test_double(ten):
    assert double(3) == 6 and ten == 10


def test_double_again():
    assert double(4) == 8
'''


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Course, task_record.TaskRecord]:
    """The demo course with s00_reach, measured once (a grading per public test file)."""
    root = tmp_path_factory.mktemp("reach") / "course"
    shutil.copytree(FIXTURES / "demo_course", root, ignore=ignore())
    course = add_assignment(Course(root, cache=MANIFEST_CACHE), "s00_reach", {
        "assignment.toml": TOML, "reach/__init__.py": "from reach.core import base, double, never_called\n",
        "reach/core.py": CODE, "tests/test_double.py": TESTS})
    return course, write_tasks(course=course, assignment_id="s00_reach", say=lambda _: None)


@pytest.fixture
def course(measured: tuple[Course, task_record.TaskRecord], tmp_path: Path) -> Course:
    """A copy of the measured course, for a test that edits it."""
    shutil.copytree(measured[0].root, tmp_path / "course")
    return Course(tmp_path / "course")


def test_a_task_is_reached_through_a_helper_or_a_fixture_and_an_uncalled_one_is_not(measured):
    course, record = measured
    assert {t.function: t.reached_by for t in record.tasks} == {
        "_twice": {"tests/test_double.py": 2}, "base": {"tests/test_double.py": 0}, "never_called": {}}
    assert record.files == {"tests/test_double.py": {"run": 2, "not_run": 0}}
    [problem] = task_record.check(course, "s00_reach")
    assert "s00.3" in problem and "never_called" in problem


def _give_reason(course: Course, reason: str) -> None:
    path = course.solution_dir("s00_reach") / task_record.RECORD
    path.write_text(path.read_text().replace('reason = ""', f'reason = "{reason}"'))


def test_a_reason_excuses_an_unreached_task_and_a_rerun_keeps_it(course):
    _give_reason(course, "only a GPU runs it")
    assert task_record.check(course, "s00_reach") == []
    previous = task_record.read_record(course, "s00_reach")
    rerun = [task_record.TaskEntry(t.id, t.file, t.function, t.reached_by) for t in previous.tasks]
    assert [t.reason for t in task_record.keep_reasons(previous, rerun)] == ["", "", "only a GPU runs it"]


def test_a_changed_test_makes_the_record_stale(course):
    _give_reason(course, "only a GPU runs it")
    test = course.solution_dir("s00_reach") / "tests" / "test_double.py"
    test.write_text(test.read_text() + "\n# edited\n")
    assert "run `make tasks A=s00_reach`" in task_record.check(course, "s00_reach")[0]


def test_the_handout_lists_the_tasks_each_test_file_runs(measured):
    _path, _text, regenerated = current_handout(measured[0], "s00_reach")
    assert "| `tests/test_double.py` | 2 | `reach/core.py` s00.1–s00.2 |" in regenerated
    assert "- s00.3 `never_called` in `reach/core.py`" in regenerated


def test_reasons_follow_their_function_when_tasks_are_renumbered():
    old = task_record.TaskRecord("a", "f", "t", "cpu", {}, [
        task_record.TaskEntry("s00.1", "p/x.py", "gpu_only", {}, "needs a GPU")])
    new = [task_record.TaskEntry("s00.1", "p/x.py", "added", {"tests/t.py": 1}),
           task_record.TaskEntry("s00.2", "p/x.py", "gpu_only", {})]
    assert [t.reason for t in task_record.keep_reasons(old, new)] == ["", "needs a GPU"]


def test_the_quick_course_check_names_a_stale_task_record_and_a_stale_lock(monkeypatch):
    """`autograder check --quick` reads both records' fingerprints: a package change (here: the
    fingerprints of today's files made to differ) is named with the command that re-measures it."""
    from autograder.authoring import invariants, variant_record

    assert invariants.check_records(COURSE, "s00_hardware") == []
    monkeypatch.setattr(task_record, "fingerprint", lambda course, aid: "changed")
    monkeypatch.setattr(variant_record, "fingerprint", lambda course, aid: "changed")
    found = invariants.check_records(COURSE, "s00_hardware")
    assert any("make tasks A=s00_hardware" in f for f in found), found
    assert any("mutants.lock" in f and "make variants A=s00_hardware" in f for f in found), found
