"""The course invariants, for every assignment in solutions/ (DESIGN.md, 'Course invariants').

These grade whole assignments on the CPU: the reference must earn every CPU-gradable point, the
untouched stub none, and every broken variant in mutants.toml must lose points."""

from __future__ import annotations

import pytest

from autograder.invariants import check_reference, check_stub, check_sync
from autograder.mutants import grade_mutants
from autograder.repo import Course, find_root

COURSE = Course(find_root())
IDS = COURSE.ids()


@pytest.mark.parametrize("aid", IDS)
def test_assignments_are_in_sync_and_leak_nothing(aid):
    assert check_sync(COURSE, aid) == []


@pytest.mark.parametrize("aid", IDS)
def test_reference_earns_every_cpu_gradable_point(aid):
    assert check_reference(COURSE, aid, sandbox="auto", hardware="cpu") == []


@pytest.mark.parametrize("aid", IDS)
def test_untouched_stub_earns_nothing(aid):
    assert check_stub(COURSE, aid, sandbox="auto", hardware="cpu") == []


@pytest.mark.parametrize("aid", IDS)
def test_every_mutant_loses_points(aid):
    outcomes = grade_mutants(course=COURSE, assignment_id=aid, say=lambda _: None)
    survivors = [o.name for o in outcomes if not o.caught]
    assert not survivors, f"mutants that lost no points: {survivors}"
