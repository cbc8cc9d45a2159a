"""Numeric analysis answers: answers/<id>.toml holds the student's numbers, a test compares each with
the value it recomputes from the student's own code. End to end on a copy of the demo course: the
stub ships every value as nan, only the student's own file is read (never the reference's, never
through a link), and each failure says what to fix."""

from __future__ import annotations

import shutil

import pytest

from autograder.authoring.stubs import leaked_solutions, write_assignment
from autograder.errors import GraderError
from autograder.host.grade import grade_assignment
from autograder.host.markers import strip_numeric

NUMBERS = """# The mean of [1, 2, 6] from your own `mean`.
# BEGIN SOLUTION
mean_of_1_2_6 = 3.0  # what your function returns
# END SOLUTION
"""
TEST = '''
import pytest
from autograder.testing import numeric_answer

from demo import mean


@pytest.mark.points(2)
def test_your_number_matches_your_function(request):
    answer = numeric_answer(request.config.rootpath, "numbers", "mean_of_1_2_6")
    assert answer == pytest.approx(mean([1.0, 2.0, 6.0]), rel=0.01)
'''
NODE = "hidden/test_analysis_hidden.py::test_your_number_matches_your_function"


@pytest.fixture
def course(demo_course):
    sol = demo_course.solutions / "s00_demo"
    toml = (sol / "assignment.toml").read_text().replace('editable = ["demo/*.py"]',
                                                         'editable = ["demo/*.py", "answers/*.toml"]')
    (sol / "assignment.toml").write_text(toml)
    (sol / "answers").mkdir()
    (sol / "answers" / "numbers.toml").write_text(NUMBERS)
    (sol / "answers" / "reference_run.json").write_text('{"seconds": [1.0]}')  # the reference's own data
    (sol / "hidden" / "test_analysis_hidden.py").write_text(TEST)
    write_assignment(demo_course, "s00_demo")
    return demo_course


def _row(course, **kw):
    result = grade_assignment(course=course, assignment_id="s00_demo", sandbox="none", hardware="cpu", **kw)
    return next(t for t in result.tests if t.test.nodeid == NODE)


def _submission(course, tmp_path):
    """The reference package as a student's submission (its answers folder decides the test)."""
    sub = tmp_path / "sub"
    shutil.copytree(course.solutions / "s00_demo" / "demo", sub / "demo")
    (sub / "answers").mkdir()
    return sub


def test_the_stub_ships_each_number_as_nan_and_not_the_reference_data(course):
    shipped = (course.assignments / "s00_demo" / "answers" / "numbers.toml").read_text()
    assert "mean_of_1_2_6 = nan  # what your function returns" in shipped and "3.0" not in shipped
    assert not (course.assignments / "s00_demo" / "answers" / "reference_run.json").exists()
    assert leaked_solutions(course.assignments / "s00_demo") == []
    (course.assignments / "s00_demo" / "answers" / "leak.toml").write_text(NUMBERS)
    assert leaked_solutions(course.assignments / "s00_demo") == [
        "answers/leak.toml: contains a numeric answer's solution markers"]


def test_unmatched_markers_in_a_numeric_answer_are_an_authoring_error():
    with pytest.raises(GraderError, match="without its END"):
        strip_numeric("# BEGIN SOLUTION\nx = 1\n", "a.toml")
    with pytest.raises(GraderError, match="unmatched"):
        strip_numeric("x = 1\n# END SOLUTION\n", "a.toml")


def test_the_reference_earns_the_points_and_the_stub_is_told_to_answer(course):
    assert _row(course, solution=True).score == 2
    stub = _row(course)
    assert stub.score == 0 and "mean_of_1_2_6 is not answered yet (nan)" in stub.reason


def test_a_right_number_earns_and_a_wrong_one_does_not(course, tmp_path):
    sub = _submission(course, tmp_path)
    (sub / "answers" / "numbers.toml").write_text("mean_of_1_2_6 = 3.01\n")  # within 1%
    assert _row(course, submission=sub).score == 2
    (sub / "answers" / "numbers.toml").write_text("mean_of_1_2_6 = 3.1\n")
    assert _row(course, submission=sub).score == 0
    (sub / "answers" / "numbers.toml").write_text('mean_of_1_2_6 = "3"\n')
    assert "must be a number, got '3'" in _row(course, submission=sub).reason


def test_a_missing_answer_file_is_never_filled_from_the_reference(course, tmp_path):
    sub = _submission(course, tmp_path)  # a right package, no answers/numbers.toml
    row = _row(course, submission=sub)
    assert row.score == 0 and "answers/numbers.toml is missing" in row.reason


def test_an_answer_file_that_links_to_the_reference_is_refused(course, tmp_path):
    sub = _submission(course, tmp_path)
    (sub / "answers" / "numbers.toml").symlink_to(course.solutions / "s00_demo" / "answers" / "numbers.toml")
    row = _row(course, submission=sub)
    assert row.score == 0 and "answers/numbers.toml is missing" in row.reason
