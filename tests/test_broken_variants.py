"""Broken variants are graded up to their first failed test: a lost point there proves the variant
caught; one that lost nothing that way is graded in full before it is called a survivor."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder.authoring.calibrate import Proposal, set_threshold
from autograder.authoring.mutants import grade_mutants
from autograder.authoring.variant_record import RECORD, read_record, stale_reason, write_record
from autograder.cli import cli
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


def _record(course: Course) -> tuple[int, str, Path]:
    """`autograder mutants s00_variants --record`: (exit code, output, the record's path)."""
    args = ["--root", str(course.root), "mutants", "s00_variants", "--record"]
    run = CliRunner().invoke(cli, args)
    return run.exit_code, run.output + str(run.exception or ""), course.solution_dir("s00_variants") / RECORD


def test_a_record_is_written_only_when_every_variant_lost_points(course):
    mutants = course.solution_dir("s00_variants") / "mutants.toml"
    two = MUTANTS[:MUTANTS.index('[[mutant]]\nname = "a_zero_first_argument_adds_one"')]
    mutants.write_text(two)
    code, output, path = _record(course)
    assert code != 0 and "add_of_zeros_is_one" in output and not path.exists()  # it survives
    mutants.write_text(two.replace('replace = "return a + b + (a == b == 0)"', 'replace = "return a * b"'))
    code, output, path = _record(course)
    assert code == 0 and path.is_file(), output
    names = ["add_of_zeros_is_one", "add_subtracts"]
    assert stale_reason(course, "s00_variants", names) is None
    assert read_record(course, "s00_variants").caught == tuple(names)


def test_a_record_goes_stale_when_a_graded_file_changes_and_not_for_the_handout(course):
    names = ["add_subtracts"]
    write_record(course, "s00_variants", names)
    sol = course.solution_dir("s00_variants")
    (sol / "README.md").write_text("# s00_variants\n\nNow with a longer handout.\n")
    assert stale_reason(course, "s00_variants", names) is None
    for rel in ("tests/test_ops.py", "calc/ops.py", "mutants.toml", "assignment.toml"):
        original = (sol / rel).read_text()
        (sol / rel).write_text(original + "\n# changed\n")
        assert "changed" in stale_reason(course, "s00_variants", names), rel
        (sol / rel).write_text(original)
        assert stale_reason(course, "s00_variants", names) is None, rel


def test_a_record_stays_fresh_when_a_gpu_bar_is_calibrated_and_not_when_a_cpu_bar_changes(course):
    # The variants are graded on the CPU, which reads no GPU bar: `calibrate --write` on a GPU runner
    # must not force every variant to be graded again; a cpu bar or the metric itself must.
    sol = course.solution_dir("s00_variants")
    spec = sol / "assignment.toml"
    spec.write_text(spec.read_text() + '\n[perf.speed]\ndescription = "x"\nunit = "x"\nbetter = "higher"\n'
                    '[perf.speed.thresholds]\nh200 = { pass = 1.0, full = 2.0, env = "gpu-image-1" }\n')
    names = ["add_subtracts"]
    write_record(course, "s00_variants", names)
    bar = Proposal("speed", 3.0, 1.8, 2.7, True)
    spec.write_text(set_threshold(spec.read_text(), "speed", "h100", bar, "calibrated here", "gpu-image-1"))
    assert 'h100 = { pass = 1.8' in spec.read_text()
    assert stale_reason(course, "s00_variants", names) is None
    calibrated = spec.read_text()
    for changed in (calibrated.replace('h200 = {', 'cpu = { pass = 0.1, full = 0.2, env = "x" }\nh200 = {'),
                    calibrated.replace('description = "x"', 'description = "y"')):
        spec.write_text(changed)
        assert "changed" in stale_reason(course, "s00_variants", names)
    spec.write_text(calibrated)
    assert stale_reason(course, "s00_variants", names) is None


def test_a_variant_missing_from_the_record_makes_it_stale(course):
    write_record(course, "s00_variants", ["add_subtracts"])
    assert "add_of_zeros_is_one" in stale_reason(course, "s00_variants", ["add_subtracts", "add_of_zeros_is_one"])
    (course.solution_dir("s00_variants") / RECORD).write_text("not toml [")
    assert "no readable" in stale_reason(course, "s00_variants", ["add_subtracts"])
