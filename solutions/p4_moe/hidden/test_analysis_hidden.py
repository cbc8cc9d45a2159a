"""The analysis of README "Analysis": each number in answers/ep_numbers.toml against the same
quantity recomputed here from the student's own package with analysis.py's trace and settings (the
grader's own copy of analysis.py)."""

from __future__ import annotations

import functools

import pytest
from analysis import balance_numbers, traffic_numbers

from autograder.testing import in_worker, numeric_answer

pytestmark = pytest.mark.kernels()  # torch code, no Triton kernel
KEYS = ["dispatch_gib", "allgather_gib", "moved_fraction", "max_recv_gib_contiguous", "max_recv_gib_eplb",
        "hottest_expert_share", "imbalance_contiguous", "imbalance_eplb", "eplb_cut"]


@in_worker
def recompute() -> dict:
    """In the worker: analysis.py's numbers from the submission's package (one call: the trace is
    drawn once)."""
    return {**traffic_numbers(), **balance_numbers()}


@functools.cache
def recomputed() -> dict:
    return recompute()


@pytest.mark.points(1)
@pytest.mark.parametrize("key", KEYS)
def test_numeric_answer_matches_your_code(key, request, tol):
    got = numeric_answer(request.config.rootpath, "ep_numbers", key)
    want = recomputed()[key]
    assert got == pytest.approx(want, rel=tol("numeric answer")["rtol"]), (
        f"{key}: you wrote {got}, your code gives {want:.5g} (python analysis.py prints every value)")
