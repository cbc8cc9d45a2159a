"""The analysis of README "Analysis": each number in answers/pipeline_numbers.toml against the same
quantity recomputed here from the student's own schedules, simulate_schedule and memory_per_rank
(Llama-3-8B, p = 4, forward_time 1, backward_time 2). The loops over m run in the worker, one call
each, so the module takes well under a second."""

from __future__ import annotations

import functools

import pytest
from conftest import load_config, needs_configs

from autograder.testing import in_worker, numeric_answer

P, M = 4, 8
GIB = 2**30
BUDGET_BYTES = 80 * GIB
MAX_M = 64


@in_worker
def w_bubble(schedule: str, p: int, m: int) -> float:
    from parallel import afab_schedule, one_f_one_b_schedule, simulate_schedule

    build = afab_schedule if schedule == "afab" else one_f_one_b_schedule
    return simulate_schedule(build(p, m), forward_time=1.0, backward_time=2.0).bubble_fraction


@in_worker
def w_schedule(schedule: str, p: int, m: int) -> list[str]:
    """The schedule as one string per stage, e.g. "F0 F1 B0 B1"."""
    from parallel import afab_schedule, one_f_one_b_schedule

    built = (afab_schedule if schedule == "afab" else one_f_one_b_schedule)(p, m)
    return [" ".join(f"{a.kind}{a.microbatch}" for a in stage) for stage in built]


@in_worker
def w_memory(config: dict, schedule: str, p: int, m: int) -> list[dict]:
    """memory_per_rank of every stage as plain numbers (bytes)."""
    from parallel import TrainingPlan, memory_per_rank

    plan = TrainingPlan(pp=p, num_microbatches=m, schedule=schedule)
    out = []
    for stage in range(p):
        b = memory_per_rank(config, plan, stage)
        out.append({"activations": b.activations, "total": b.total})
    return out


@in_worker
def w_bubbles_1f1b(p: int, max_m: int) -> list[float]:
    from parallel import one_f_one_b_schedule, simulate_schedule

    return [simulate_schedule(one_f_one_b_schedule(p, m), forward_time=1.0, backward_time=2.0).bubble_fraction
            for m in range(1, max_m + 1)]


@in_worker
def w_totals_afab(config: dict, p: int, max_m: int) -> list[int]:
    """The largest stage total (bytes) under AFAB for m = 1..max_m."""
    from parallel import TrainingPlan, memory_per_rank

    return [max(memory_per_rank(config, TrainingPlan(pp=p, num_microbatches=m, schedule="afab"), s).total
                for s in range(p)) for m in range(1, max_m + 1)]


def peak_in_flight(stage_row: str) -> int:
    """Most micro-batches forwarded and not yet backwarded while walking one stage's actions."""
    held = peak = 0
    for token in stage_row.split():
        held += 1 if token[0] == "F" else -1
        peak = max(peak, held)
    return peak


@functools.cache
def llama() -> dict:
    return load_config("llama-3-8b")


QUANTITIES = {
    "bubble_afab": lambda: w_bubble("afab", P, M),
    "bubble_1f1b": lambda: w_bubble("1f1b", P, M),
    "activations_gib_afab_stage0": lambda: w_memory(llama(), "afab", P, M)[0]["activations"] / GIB,
    "activations_gib_1f1b_stage0": lambda: w_memory(llama(), "1f1b", P, M)[0]["activations"] / GIB,
}


def _largest_m_within_budget() -> int:
    fits = [m for m, total in enumerate(w_totals_afab(llama(), P, MAX_M), start=1) if total <= BUDGET_BYTES]
    return max(fits, default=0)


def _smallest_m_for_bubble() -> int:
    return next((m for m, b in enumerate(w_bubbles_1f1b(P, MAX_M), start=1) if b <= 0.10), 0)


COUNTS = {
    "peak_in_flight_afab_stage0": lambda: peak_in_flight(w_schedule("afab", P, M)[0]),
    "peak_in_flight_1f1b_stage0": lambda: peak_in_flight(w_schedule("1f1b", P, M)[0]),
    "max_microbatches_afab_80gib": _largest_m_within_budget,
    "microbatches_1f1b_bubble_10pct": _smallest_m_for_bubble,
}


@pytest.mark.points(1)
@needs_configs("llama-3-8b")
@pytest.mark.parametrize("key", QUANTITIES)
def test_numeric_answer_matches_your_own_code(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "pipeline_numbers", key)
    expected = QUANTITIES[key]()
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/pipeline_numbers.toml: {key} = {answer}, but your code gives {expected:.4g}")


@pytest.mark.points(1)
@needs_configs("llama-3-8b")
@pytest.mark.parametrize("key", COUNTS)
def test_count_answer_matches_your_own_code(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "pipeline_numbers", key)
    expected = COUNTS[key]()
    assert answer == pytest.approx(expected, abs=tol("numeric answer, count")["atol"]), (
        f"answers/pipeline_numbers.toml: {key} = {answer}, but your code gives {expected}")
