"""A later assignment builds on an earlier one's package ([[given]] package): the earlier reference
ships beside the new package, a student may carry their own in, the judge never imports it, and the
course keeps one copy of it (the earlier assignment's)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from autograder.authoring.invariants import check_given
from autograder.authoring.release import build_release
from autograder.authoring.stubs import stale_paths
from autograder.host.grade import grade_assignment
from autograder.host.repo import Course
from autograder.host.spec import parse_spec
from conftest import add_assignment

LATER_TOML = """[assignment]
id = "p1_later"
title = "An assignment built on s00_demo"
stage = 6
package = "later"
editable = ["later/*.py", "demo/*.py"]

[limits]
test_timeout_s = 6
file_timeout_s = 25
memory_mb = 6144

[[given]]
package = "demo"
solves = "s00_demo"
"""

LATER_CODE = '''"""Built on the demo package of s00_demo."""

from demo import add


def twice(a: float) -> float:
    """a + a, through demo.add."""
    # BEGIN SOLUTION
    return add(a, a)
    # END SOLUTION
'''

LATER_TESTS = '''import pytest

from later import twice


@pytest.mark.points(2)
def test_twice_adds_a_number_to_itself():
    assert twice(3.0) == 6.0 and twice(-1.5) == -3.0


@pytest.mark.points(1)
def test_the_judge_cannot_import_the_given_package():
    with pytest.raises(ImportError, match="the student's code beside later"):
        import demo  # noqa: F401
'''


@pytest.fixture
def later_course(demo_course: Course) -> Course:
    """The demo course plus p1_later, whose package `later` imports the given package `demo`."""
    return add_assignment(demo_course, "p1_later", {
        "assignment.toml": LATER_TOML, "later/__init__.py": "from later.calc import twice\n\n__all__ = ['twice']\n",
        "later/calc.py": LATER_CODE, "tests/test_later.py": LATER_TESTS})


def test_the_student_copy_ships_the_earlier_reference_beside_the_stub(later_course):
    student = later_course.student_dir("p1_later")
    assert "return a + b" in (student / "demo" / "ops.py").read_text()
    assert "SOLUTION" not in (student / "demo" / "ops.py").read_text()
    assert "return add(a, a)" not in (student / "later" / "calc.py").read_text()
    assert stale_paths(later_course, "p1_later") == []
    (student / "demo" / "ops.py").write_text("stale\n")
    assert stale_paths(later_course, "p1_later") == ["differs demo/ops.py"]


def test_the_reference_grades_with_the_given_package_and_the_judge_never_imports_it(later_course):
    result = grade_assignment(course=later_course, assignment_id="p1_later", solution=True)
    assert (result.score, result.max_score) == (3, 3), [(t.test.nodeid, t.reason) for t in result.tests]
    assert result.notes == []


def test_the_stub_loses_what_the_assignment_adds(later_course):
    result = grade_assignment(course=later_course, assignment_id="p1_later")
    lost = {t.test.nodeid.split("::")[1] for t in result.tests if t.score < t.max_score}
    assert lost == {"test_twice_adds_a_number_to_itself"}


def _submission(tmp_path: Path, course: Course, demo_ops: str | None) -> Path:
    """The reference's `later` package, with the given `demo` replaced (or left out: None)."""
    sub = tmp_path / "submission"
    (sub / "later").mkdir(parents=True)
    for name in ("__init__.py", "calc.py"):
        (sub / "later" / name).write_text((course.solutions / "p1_later" / "later" / name).read_text())
    if demo_ops is not None:
        (sub / "demo").mkdir()
        (sub / "demo" / "__init__.py").write_text("from demo.ops import add\n")
        (sub / "demo" / "ops.py").write_text(demo_ops)
    return sub


def test_a_student_carries_their_own_earlier_package_in(later_course, tmp_path):
    sub = _submission(tmp_path, later_course, "def add(a, b):\n    return a - b\n")
    result = grade_assignment(course=later_course, assignment_id="p1_later", submission=sub)
    lost = {t.test.nodeid.split("::")[1] for t in result.tests if t.score < t.max_score}
    assert lost == {"test_twice_adds_a_number_to_itself"}  # their own (wrong) demo.add was used


def test_a_submission_without_the_given_package_gets_the_course_copy_and_a_note(later_course, tmp_path):
    sub = _submission(tmp_path, later_course, None)
    result = grade_assignment(course=later_course, assignment_id="p1_later", submission=sub)
    assert result.score == result.max_score == 3
    assert result.notes == ["demo/ is not in the submission: the course's given demo was used"]


def test_a_given_package_is_the_earlier_assignments_own_and_never_copied(later_course):
    assert check_given(later_course, "p1_later") == []
    (later_course.solutions / "p1_later" / "demo").mkdir()
    assert "copies the given package" in check_given(later_course, "p1_later")[0]
    (later_course.solutions / "p1_later" / "demo").rmdir()
    toml = later_course.solutions / "p1_later" / "assignment.toml"
    toml.write_text(toml.read_text().replace('package = "demo"', 'package = "other"'))
    assert "is not the package of s00_demo ('demo')" in check_given(later_course, "p1_later")[0]


@pytest.mark.parametrize("given, message", [
    ({"solves": "s00_demo"}, "set exactly one of `file` and `package`"),
    ({"file": "later/k.py", "package": "demo", "solves": "s00_demo"}, "set exactly one"),
    ({"package": "not-a-name", "solves": "s00_demo"}, "not a valid Python package name"),
    ({"package": "later", "solves": "s00_demo"}, "must differ from each other and from 'later'"),
    ({"package": 3, "solves": "s00_demo"}, r"\[\[given\]\] #1.package: 3 is not of type 'string'"),
])
def test_a_bad_given_entry_is_refused_with_the_reason(given, message):
    head = {"id": "p1_later", "title": "t", "stage": 6, "package": "later", "editable": ["later/*.py"]}
    with pytest.raises(ValueError, match=message):
        parse_spec({"assignment": head, "given": [given]})


def test_the_release_ships_the_given_package_only_after_its_exercise_is_due(later_course, tmp_path):
    schedule = later_course.root / "course" / "schedule.toml"
    schedule.parent.mkdir()
    week1 = '[[week]]\nnumber = 1\nrelease = 2027-01-11\ndue = 2027-01-18T23:59:00Z\nassignments = ["s00_demo"]\n'
    week2 = '[[week]]\nnumber = 2\nrelease = {}\ndue = 2027-02-01\nassignments = ["p1_later"]\n'
    schedule.write_text(week1 + week2.format(dt.date(2027, 1, 18)))
    with pytest.raises(Exception, match="gives demo/, the answer to s00_demo, before s00_demo is due"):
        build_release(course=later_course, week=2, out=tmp_path / "early")
    schedule.write_text(week1 + week2.format(dt.date(2027, 1, 19)))
    assert build_release(course=later_course, week=2, out=tmp_path / "release") == ["s00_demo", "p1_later"]
    shipped = tmp_path / "release" / "assignments" / "p1_later" / "demo" / "ops.py"
    assert "return a + b" in shipped.read_text()
