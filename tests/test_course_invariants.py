"""The course invariants, for every assignment in solutions/ (DESIGN.md, 'Course invariants').

These grade whole assignments on the CPU: the reference must earn every CPU-gradable point, the
untouched stub none, and every broken variant in mutants.toml must lose points."""

from __future__ import annotations

import pytest

from autograder.grade import grade_assignment
from autograder.invariants import check_sync
from autograder.mutants import grade_mutants
from autograder.repo import Course, find_root

COURSE = Course(find_root())
IDS = COURSE.ids()


@pytest.mark.parametrize("aid", IDS)
def test_assignments_are_in_sync_and_leak_nothing(aid):
    assert check_sync(COURSE, aid) == []


@pytest.mark.parametrize("aid", IDS)
def test_reference_earns_every_cpu_gradable_point(aid):
    result = grade_assignment(course=COURSE, assignment_id=aid, solution=True, hardware="cpu")
    lost = {t.test.nodeid: (t.reason or t.output)[-600:] for t in result.tests if t.graded and t.score < t.test.points}
    assert result.max_score > 0 and not lost, lost


@pytest.mark.parametrize("aid", IDS)
def test_untouched_stub_earns_nothing(aid):
    result = grade_assignment(course=COURSE, assignment_id=aid, hardware="cpu")
    earned = [t.test.nodeid for t in result.tests if t.score > 0]
    assert result.tests and not earned


@pytest.mark.parametrize("aid", IDS)
def test_every_mutant_loses_points(aid):
    outcomes = grade_mutants(course=COURSE, assignment_id=aid, say=lambda _: None)
    survivors = [o.name for o in outcomes if not o.caught]
    assert not survivors, f"mutants that lost no points: {survivors}"
