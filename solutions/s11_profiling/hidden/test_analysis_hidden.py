"""The analysis of README "Analysis": each number in answers/trace_numbers.toml against the same
quantity recomputed here from the student's own traceprof on the committed traces p1_decode_eager
and p1_decode_graphs. One worker call per trace loads it once and returns plain data; the medians,
ratios and shares are taken here."""

from __future__ import annotations

import functools
import statistics

import pytest

import coursedata
from autograder.testing import in_worker, numeric_answer

EAGER, GRAPHS = "p1_decode_eager", "p1_decode_graphs"


def _attempt(out: dict, key: str, compute) -> None:
    """out[key] = compute(), or out["errors"][key] = what it raised (one missing piece fails only
    the numbers that need it)."""
    try:
        out[key] = compute()
    except Exception as err:  # noqa: BLE001  reported by the judge
        out["errors"][key] = f"{type(err).__name__}: {err}"


@in_worker
def w_analysis(path: str) -> dict:
    """The student's breakdown, gap durations, largest gap and its cause's duration on one trace."""
    from traceprof import gap_cause, gaps, largest_gap, load_trace, temporal_breakdown

    events = load_trace(path)

    def breakdown() -> dict:
        b = temporal_breakdown(events)
        return {"span": b.span_us, "idle": b.idle_us, "frac": b.idle_fraction}

    def cause_us() -> float:
        cause = gap_cause(events, largest_gap(events))
        return 0.0 if cause is None else cause.dur

    out: dict = {"errors": {}}
    _attempt(out, "breakdown", breakdown)
    _attempt(out, "gaps", lambda: [g.dur for g in gaps(events)])
    _attempt(out, "largest", lambda: largest_gap(events).dur)
    _attempt(out, "cause_us", cause_us)
    return out


@functools.cache
def analysis(name: str) -> dict:
    return w_analysis(str(coursedata.profile_path(name)))


def part(name: str, key: str):
    """One piece of the worker's analysis of trace `name`, or a failure naming what raised."""
    out = analysis(name)
    if key not in out:
        error = out["errors"].get(key, "nothing")
        pytest.fail(f"on {name}, the code behind {key} raised {error}")
    return out[key]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


QUANTITIES = {
    "idle_fraction_eager": lambda: part(EAGER, "breakdown")["frac"],
    "idle_fraction_graphs": lambda: part(GRAPHS, "breakdown")["frac"],
    "span_ratio_eager_over_graphs": lambda: part(EAGER, "breakdown")["span"] / part(GRAPHS, "breakdown")["span"],
    "median_gap_us_eager": lambda: median(part(EAGER, "gaps")),
    "median_gap_us_graphs": lambda: median(part(GRAPHS, "gaps")),
    "largest_gap_us_eager": lambda: part(EAGER, "largest"),
    "largest_gap_cause_us_eager": lambda: part(EAGER, "cause_us"),
    "top3_gap_share_graphs": lambda: sum(sorted(part(GRAPHS, "gaps"), reverse=True)[:3]) / part(GRAPHS, "breakdown")["idle"],
}


@pytest.mark.points(1)
@pytest.mark.parametrize("key", QUANTITIES)
def test_numeric_answer_matches_your_own_trace_analysis(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "trace_numbers", key)
    expected = QUANTITIES[key]()
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rel"]), (
        f"answers/trace_numbers.toml: {key} = {answer}, but your traceprof gives {expected:.4g}")
