"""The analysis of README "Analysis": each number in answers/trace_numbers.toml against the same
quantity recomputed here from the student's own traceprof on the committed traces p1_decode_eager
and p1_decode_graphs, and each number in answers/engine_numbers.toml the same way on the student's
own recording of their engine (answers/engine_trace.json.gz, made by record_engine_trace.py, the
course's copy), once the judge has checked that file is such a recording. One worker call per trace
loads it once and returns plain data; the medians, ratios and shares are taken here."""

from __future__ import annotations

import functools
import gzip
import json
import statistics
from pathlib import Path

import pytest

import coursedata
from autograder.testing import in_worker, numeric_answer, read_answer
from conftest import w_kernels
from record_engine_trace import STEP_LABEL, STEPS

EAGER, GRAPHS = "p1_decode_eager", "p1_decode_graphs"
ENGINE_TRACE = "answers/engine_trace.json.gz"
MAX_TRACE_BYTES = 256 << 20  # decompressed; a two-step trace of the course model is a few MiB


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


def _recording_problem(events: object) -> str | None:
    """Why a parsed trace is not a recording by record_engine_trace.py, or None."""
    if not isinstance(events, list):
        return "it has no traceEvents list (export it with prof.export_chrome_trace)"
    steps = sum(1 for e in events if isinstance(e, dict) and e.get("name") == STEP_LABEL
                and e.get("cat") == "user_annotation")
    kernels = sum(1 for e in events if isinstance(e, dict) and e.get("cat") == "kernel")
    if steps != STEPS:
        return f"it holds {steps} '{STEP_LABEL}' ranges on the host, not the {STEPS} the script records"
    if kernels == 0:
        return "it holds no GPU kernel: it was not recorded on a CUDA GPU"
    return None


@functools.cache
def engine_trace(root: str) -> str:
    """The path of the student's engine trace, once checked to be record_engine_trace.py's output."""
    path = Path(root) / ENGINE_TRACE
    read_answer(root, ENGINE_TRACE, 1)  # missing or a link: fails with what to do
    try:
        with gzip.open(path) as f:
            raw = f.read(MAX_TRACE_BYTES + 1)
        trace = json.loads(raw) if len(raw) <= MAX_TRACE_BYTES else None
    except (OSError, EOFError, ValueError) as e:
        pytest.fail(f"{ENGINE_TRACE} is not a gzipped JSON trace ({e}): record it with `python record_engine_trace.py`")
    if trace is None:
        pytest.fail(f"{ENGINE_TRACE} is over {MAX_TRACE_BYTES >> 20} MiB decompressed: record the script's two steps only")
    problem = _recording_problem(trace.get("traceEvents") if isinstance(trace, dict) else None)
    if problem:
        pytest.fail(f"{ENGINE_TRACE} is not your engine's recording: {problem}. "
                    "Record it on a GPU with `python record_engine_trace.py` (README, 'Analysis', part 3)")
    return str(path)


@functools.cache
def analysis(name: str) -> dict:
    return w_analysis(str(coursedata.profile_path(name)))


@functools.cache
def engine_analysis(root: str) -> dict:
    return w_analysis(engine_trace(root))


def engine_part(root: str, key: str):
    out = engine_analysis(root)
    if key not in out:
        pytest.fail(f"on {ENGINE_TRACE}, the code behind {key} raised {out['errors'].get(key, 'nothing')}")
    return out[key]


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


ENGINE_QUANTITIES = {
    "engine_idle_fraction": lambda root: engine_part(root, "breakdown")["frac"],
    "engine_median_gap_us": lambda root: median(engine_part(root, "gaps")),
    "engine_largest_gap_us": lambda root: engine_part(root, "largest"),
    "engine_largest_gap_cause_us": lambda root: engine_part(root, "cause_us"),
    "engine_kernels_per_step": lambda root: sum(row[0] for row in w_kernels(engine_trace(root)).values()) / STEPS,
}


@pytest.mark.points(1)
@pytest.mark.parametrize("key", ENGINE_QUANTITIES)
def test_numeric_answer_matches_your_own_engine_trace(key, request, tol):
    root = str(request.config.rootpath)
    answer = numeric_answer(root, "engine_numbers", key)
    expected = ENGINE_QUANTITIES[key](root)
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rel"]), (
        f"answers/engine_numbers.toml: {key} = {answer}, but your traceprof on {ENGINE_TRACE} gives {expected:.4g}")
