"""Broken variants are graded up to their first failed test: a lost point there proves the variant
caught; one that lost nothing that way is graded in full before it is called a survivor."""

from __future__ import annotations

import pytest

from autograder.authoring.mutants import grade_mutants
from autograder.host.grade import grade_assignment
from autograder.host.repo import Course
from conftest import add_assignment

TOML = """[assignment]
id = "s00_variants"
title = "Broken variants graded up to their first failure"
stage = 0
package = "calc"
editable = ["calc/*.py"]

[limits]
test_timeout_s = 6
file_timeout_s = 25
memory_mb = 6144
"""

CODE = '''"""Two operations."""


def add(a: int, b: int) -> int:
    """a + b."""
    # BEGIN SOLUTION
    return a + b
    # END SOLUTION


def mul(a: int, b: int) -> int:
    """a * b."""
    # BEGIN SOLUTION
    return a * b
    # END SOLUTION
'''

# Collection order is file order: the unscored check runs first, then the scored ones.
TESTS = '''import pytest

from calc import add, mul


@pytest.mark.points(0)
def test_add_of_zeros_is_zero_unscored():
    assert add(0, 0) == 0


def test_add():
    assert add(2, 3) == 5


def test_add_to_zero():
    assert add(0, 5) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_mul_by_one():
    assert mul(7, 1) == 7
'''

MUTANTS = '''[[mutant]]
name = "add_subtracts"
file = "calc/ops.py"
find = "return a + b"
replace = "return a - b"
tests = ["tests/test_ops.py"]

[[mutant]]
name = "add_of_zeros_is_one"
file = "calc/ops.py"
find = "return a + b"
replace = "return a + b + (a == b == 0)"
tests = ["tests/test_ops.py"]

[[mutant]]
name = "a_zero_first_argument_adds_one"
file = "calc/ops.py"
find = "return a + b"
replace = "return a + b + (a == 0)"
tests = ["tests/test_ops.py"]
'''


@pytest.fixture
def course(demo_course: Course) -> Course:
    return add_assignment(demo_course, "s00_variants", {
        "assignment.toml": TOML, "calc/__init__.py": "from calc.ops import add, mul\n", "calc/ops.py": CODE,
        "tests/test_ops.py": TESTS, "mutants.toml": MUTANTS})


def _outcome(course: Course, name: str) -> tuple[bool, float, float]:
    [o] = grade_mutants(course=course, assignment_id="s00_variants", say=lambda _: None, names=[name])
    return o.caught, o.score, o.max_score


def test_a_variant_is_graded_only_up_to_its_first_failed_test(course):
    full = grade_assignment(course=course, assignment_id="s00_variants", solution=True)
    assert (full.score, full.max_score) == (4, 4)
    caught, score, max_score = _outcome(course, "add_subtracts")
    # test_add fails second: the unscored test and test_add ran, the three after it did not
    assert caught and (score, max_score) == (0, 1)


def test_a_variant_that_fails_only_an_unscored_test_is_graded_in_full_and_survives(course):
    assert _outcome(course, "add_of_zeros_is_one") == (False, 4, 4)


def test_a_stop_at_an_unscored_test_falls_back_to_the_full_grading_which_finds_the_later_loss(course):
    # the unscored test fails first (0 of 0 points lost); graded in full, test_add_to_zero fails
    assert _outcome(course, "a_zero_first_argument_adds_one") == (True, 3, 4)
