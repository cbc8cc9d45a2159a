"""The analysis of README "Analysis": each number in answers/backfill_numbers.toml against the same
quantity recomputed here from the student's own `simulate` and `summarize` on the analysis trace
(analysis.py, the course's copy: NODES and trace_rows()) under FIFO and EASY backfill."""

from __future__ import annotations

import functools

import pytest
from analysis import NODES, trace_rows
from conftest import raised, run_sim

from autograder.testing import numeric_answer


@functools.cache
def run(policy: str) -> dict:
    """run_sim's output (records, summary) for one policy, once per module."""
    out = run_sim(NODES, trace_rows(), policy)
    assert out["error"] is None, raised(out["error"], f" replaying the analysis trace under {policy}")
    return out


def extra_waits() -> list[float]:
    """wait under EASY backfill - wait under FIFO, per job."""
    fifo, easy = run("fifo")["records"], run("easy")["records"]
    return [easy[job_id][3] - fifo[job_id][3] for job_id in fifo]


QUANTITIES = {
    "mean_wait_fifo_s": lambda: run("fifo")["summary"]["mean_wait"],
    "mean_wait_easy_s": lambda: run("easy")["summary"]["mean_wait"],
    "utilisation_fifo": lambda: run("fifo")["summary"]["utilisation"],
    "utilisation_easy": lambda: run("easy")["summary"]["utilisation"],
    "largest_extra_wait_s": lambda: max(extra_waits()),
}


@pytest.mark.points(1)
@pytest.mark.parametrize("key", QUANTITIES)
def test_numeric_answer_matches_your_own_simulation(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "backfill_numbers", key)
    expected = QUANTITIES[key]()
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rel"]), (
        f"answers/backfill_numbers.toml: {key} = {answer}, but your simulator gives {expected:.5g}")


@pytest.mark.points(1)
def test_delayed_job_count_matches_your_own_simulation(request, tol):
    answer = numeric_answer(request.config.rootpath, "backfill_numbers", "jobs_delayed_by_backfill")
    expected = sum(extra > 0 for extra in extra_waits())
    assert answer == pytest.approx(expected, abs=tol("numeric answer, count")["abs"]), (
        f"answers/backfill_numbers.toml: jobs_delayed_by_backfill = {answer}, but your simulator gives {expected}")
