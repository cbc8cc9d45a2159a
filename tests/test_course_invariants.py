"""The course invariants, for every assignment in solutions/ (DESIGN.md, 'Course invariants').

These grade whole assignments on the CPU: the reference must earn every CPU-gradable point, the
untouched stub none, and every broken variant in mutants.toml must lose points."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from autograder.authoring.invariants import check_handout, check_notebook, check_reference, check_stub, check_sync
from autograder.authoring.mutants import grade_mutants, load_mutants
from autograder.authoring.variant_record import stale_reason
from autograder.hardware import has_cuda
from autograder.host.repo import Course, find_root
from autograder.notebooks.exercise import notebook_ids

COURSE = Course(find_root())
IDS = COURSE.ids()
NOTEBOOK_IDS = notebook_ids(COURSE)
# Broken variants are graded two at a time: each grading is one judge and one worker taking turns
# (about one core), and they are ~200 of the suite's minutes. Load can only make a variant lose
# more points (a timeout), never save one.
MUTANT_GRADINGS_AT_ONCE = 2
# `make test` grades every other broken variant of an assignment whose mutants.lock is stale (its
# budget on a 2-core machine); AUTOGRADER_ALL_VARIANTS=1 grades all of them, record or not.
ALL_VARIANTS = os.environ.get("AUTOGRADER_ALL_VARIANTS") == "1"


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


@pytest.mark.parametrize("nid", NOTEBOOK_IDS)
def test_notebook_source_earns_every_point_and_its_release_none(nid):
    """The notebook exercises keep the invariants too: graded like packages, released by nbgrader."""
    assert check_notebook(COURSE, nid, sandbox="auto", hardware="cpu") == []


@pytest.mark.parametrize("aid", IDS)
def test_every_broken_variant_loses_points(aid):
    """Every mutant of mutants.toml loses points (the GPU ones only where CUDA is: `autograder
    mutants <id> --gpu-only` grades them on a GPU). `make variants` grades all of them and records
    it in mutants.lock; `make test` grades every other one again only where that record is stale
    (the assignment's files changed since), and otherwise checks the record covers every variant."""
    mutants = load_mutants(COURSE.solution_dir(aid))
    gradable = [m.name for m in mutants if not m.gpu or has_cuda()]
    if not gradable:
        pytest.skip(f"{aid} has no broken variant gradable here")
    if not ALL_VARIANTS and stale_reason(COURSE, aid, gradable) is None:
        return  # every variant was graded against exactly these files and lost points
    names = gradable if ALL_VARIANTS else gradable[::2]

    def grade(name: str):
        [outcome] = grade_mutants(course=COURSE, assignment_id=aid, say=lambda _: None, names=[name])
        return outcome

    with ThreadPoolExecutor(max_workers=MUTANT_GRADINGS_AT_ONCE) as pool:
        outcomes = list(pool.map(grade, names))
    assert all(o.graded_here for o in outcomes), [o.name for o in outcomes if not o.graded_here]
    survivors = [f"{o.name} ({o.score:g}/{o.max_score:g})" for o in outcomes if not o.caught]
    assert not survivors, f"{aid}: broken variants that lost no points: {survivors}"
