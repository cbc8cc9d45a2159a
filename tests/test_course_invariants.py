"""The course invariants, for every assignment in solutions/ (DESIGN.md, 'Course invariants').

These grade whole assignments on the CPU: the reference must earn every CPU-gradable point, the
untouched stub none, and every broken variant in mutants.toml must lose points."""

from __future__ import annotations

import pytest

from autograder.authoring.invariants import check_handout, check_reference, check_stub, check_sync
from autograder.hardware import has_cuda
from autograder.authoring.mutants import grade_mutants, load_mutants
from autograder.host.repo import Course, find_root

COURSE = Course(find_root())
IDS = COURSE.ids()
MUTANTS = [pytest.param(aid, m.name, m.gpu, id=f"{aid}-{m.name}")
           for aid in IDS for m in load_mutants(COURSE.solution_dir(aid))]


@pytest.mark.parametrize("aid", IDS)
def test_assignments_are_in_sync_and_leak_nothing(aid):
    assert check_sync(COURSE, aid) == []


@pytest.mark.parametrize("aid", IDS)
def test_the_handouts_grading_section_agrees_with_the_spec_and_tests(aid):
    assert check_handout(COURSE, aid) == []


@pytest.mark.parametrize("aid", IDS)
def test_reference_earns_every_cpu_gradable_point(aid):
    assert check_reference(COURSE, aid, sandbox="auto", hardware="cpu") == []


@pytest.mark.parametrize("aid", IDS)
def test_untouched_stub_earns_nothing(aid):
    assert check_stub(COURSE, aid, sandbox="auto", hardware="cpu") == []


@pytest.mark.parametrize(("aid", "name", "gpu"), MUTANTS)
def test_every_mutant_loses_points(aid, name, gpu):
    if gpu and not has_cuda():
        pytest.skip("a GPU mutant: not run here (grade it with `autograder mutants <id> --gpu-only` on a GPU)")
    [outcome] = grade_mutants(course=COURSE, assignment_id=aid, say=lambda _: None, names=[name])
    assert outcome.graded_here, f"{name} was not graded here"
    assert outcome.caught, f"{name} lost no points ({outcome.score:g}/{outcome.max_score:g})"
