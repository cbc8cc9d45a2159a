"""The analysis of README "Analysis": each number in answers/pd_numbers.toml against the same quantity
recomputed here from your own timings in answers/pd_run.json, with the grader's own least squares
(numpy) and its own simulator (placement_oracle.py, judge side), on the question analysis.py asks:
the first 200 requests of datasets/traces/sharegpt.json cut to 192 prompt / 64 output tokens,
SLOs and rates derived from the fitted model by the rules below (analysis.py's docstring):

    TTFT SLO = 5 x prefill_s(median prompt_len)    TPOT SLO = 3 x decode_s(8)
    rates    = (1 / prefill_s(mean prompt_len)) x 2 ** (k / 4), k = -8 .. 8
    each rounded to 3 significant digits; 4 GPUs, max_decode_batch 16, attainment target 0.9

Numbers are compared at the "numeric answer" tolerance (1%), placements exactly.
"""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest

from autograder.testing import AnswerProblem, in_the_worker, numeric_answer, read_answer

if not in_the_worker():  # the grader's simulator runs in the judge only
    import placement_oracle as oracle

RUN = "answers/pd_run.json"
SCHEMA = "p5_pd.pd_run/1"
PREFILL_X = (16, 32, 64, 128, 192)
DECODE_X = (1, 2, 4, 8, 16)
TRACE = {"name": "sharegpt", "num_requests": 200, "max_prompt_len": 192, "max_output_len": 64}
NUM_GPUS, MAX_DECODE_BATCH, TARGET = 4, 16, 0.9
KEYS = ("prefill_per_token_ms", "decode_per_seq_ms", "best_num_prefill", "best_num_decode", "best_per_gpu",
        "one_one_per_gpu")


def _points(data: dict, key: str, xs: tuple[int, ...]) -> list[tuple[int, float]]:
    """data[key] as [(x, seconds)]: x exactly `xs` in order, every time finite and > 0."""
    rows = data[key]
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 2 for r in rows):
        raise AnswerProblem(f"{RUN}: {key} must be a list of [x, seconds] pairs, got {rows!r:.200}")
    got_x = [r[0] for r in rows]
    if len(rows) != len(xs) or any(isinstance(x, bool) or not isinstance(x, int) or x != w for x, w in zip(got_x, xs)):
        raise AnswerProblem(f"{RUN}: {key} must be measured at x = {list(xs)} in that order, got x = {got_x}")
    for x, y in rows:
        if isinstance(y, bool) or not isinstance(y, (int, float)) or not math.isfinite(y) or y <= 0:
            raise AnswerProblem(f"{RUN}: {key} at x = {x}: the time must be a finite number of seconds > 0, got {y!r}")
    return [(int(x), float(y)) for x, y in rows]


@functools.cache
def load_run(root: str) -> dict:
    """The student's run, its schema checked: {"prefill": [(tokens, s)], "decode": [(batch, s)], "data": raw}."""
    try:
        data = json.loads(read_answer(root, RUN, 1 << 20))
    except json.JSONDecodeError as e:
        raise AnswerProblem(f"{RUN} is not valid JSON ({e}): write it with analysis.py") from None
    if not isinstance(data, dict):
        raise AnswerProblem(f"{RUN} must hold a JSON object, got {type(data).__name__}")
    want = {"schema", "machine", "prefill_points", "decode_points", "trace", "slo", "rates", "num_gpus",
            "max_decode_batch"}
    if want - data.keys():
        raise AnswerProblem(f"{RUN} lacks {sorted(want - data.keys())}: it is not the run analysis.py writes")
    if data["schema"] != SCHEMA:
        raise AnswerProblem(f"{RUN}: schema {data['schema']!r}, want {SCHEMA!r}: write it with this assignment's analysis.py")
    if not isinstance(data["machine"], (dict, str)) or not data["machine"]:
        raise AnswerProblem(f"{RUN}: machine must say where you measured, got {data['machine']!r}")
    return {"prefill": _points(data, "prefill_points", PREFILL_X),
            "decode": _points(data, "decode_points", DECODE_X), "data": data}


def lstsq_line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line, by numpy's solver; each clipped to >= 0."""
    a = np.array([[1.0, x] for x, _ in points])
    (intercept, slope), *_ = np.linalg.lstsq(a, np.array([y for _, y in points]), rcond=None)
    return max(float(intercept), 0.0), max(float(slope), 0.0)


@functools.cache
def trace() -> tuple[tuple[float, int, int], ...]:
    """(arrival_s, prompt_len, output_len) of the analysis trace: the first 200 sharegpt requests, cut."""
    import coursedata

    reqs = coursedata.load_trace(TRACE["name"]).requests[:TRACE["num_requests"]]
    return tuple((r.arrival_s, min(r.prompt_len, TRACE["max_prompt_len"]), min(r.output_len, TRACE["max_output_len"]))
                 for r in reqs)


def three_digits(x: float) -> float:
    return round(x, 2 - math.floor(math.log10(abs(x))))


@functools.cache
def judged(root: str) -> dict:
    """Every quantity of the handout, recomputed from the student's points."""
    run = load_run(root)
    pb, pt = lstsq_line(run["prefill"])
    db, ds = lstsq_line(run["decode"])
    m = {"prefill_base_s": pb, "prefill_per_token_s": pt, "decode_base_s": db, "decode_per_seq_s": ds}
    if pb + pt <= 0 or db + ds <= 0:
        raise AnswerProblem(f"{RUN}: the points fit to a phase that takes no time ({m}): measure again")
    reqs = list(trace())
    prompts = [p for _, p, _ in reqs]
    slo = (three_digits(5 * oracle.prefill_s(m, float(np.median(prompts)))), three_digits(3 * oracle.decode_s(m, 8)))
    capacity = 1.0 / oracle.prefill_s(m, float(np.mean(prompts)))
    rates = [three_digits(capacity * 2 ** (k / 4)) for k in range(-8, 9)]
    rows = oracle.best_placement(reqs, m, slo, NUM_GPUS, rates, MAX_DECODE_BATCH, TARGET)
    one_one = next(r for r in rows if r[:2] == (1, 1))
    return {"slo": slo, "rates": rates, "table": rows,
            "numbers": {"prefill_per_token_ms": pt * 1e3, "decode_per_seq_ms": ds * 1e3,
                        "best_num_prefill": rows[0][0], "best_num_decode": rows[0][1],
                        "best_per_gpu": rows[0][3], "one_one_per_gpu": one_one[3]}}


def _table(rows: list[tuple]) -> str:
    return "; ".join(f"{p}P+{d}D: {g:.4g}/s ({pg:.4g} per GPU)" for p, d, g, pg in rows)


@pytest.mark.points(1)
@pytest.mark.parametrize("key", KEYS)
def test_numeric_answer_matches_your_run(key, request, tol):
    root = str(request.config.rootpath)
    got = numeric_answer(root, "pd_numbers", key)
    want = judged(root)
    expected = want["numbers"][key]
    if key.startswith("best_num_"):
        assert got == expected, (f"answers/pd_numbers.toml: {key} = {got:g}, but your {RUN} gives {expected} "
                                 f"(the grader's placements, best first: {_table(want['table'])})")
    else:
        assert got == pytest.approx(expected, rel=tol("numeric answer")["rtol"], abs=1e-12), (
            f"answers/pd_numbers.toml: {key} = {got:g}, but your {RUN} gives {expected:.5g} "
            f"(SLOs TTFT <= {want['slo'][0]} s, TPOT <= {want['slo'][1]} s; placements: {_table(want['table'])})")


@pytest.mark.points(1)
def test_your_answers_come_from_the_question_analysis_py_asks(request):
    """The run's trace, SLOs, rates and sizes are the ones analysis.py's rules give for its own points
    (a run that asks an easier question earns nothing here), and the numbers are written."""
    root = str(request.config.rootpath)
    for key in KEYS:
        numeric_answer(root, "pd_numbers", key)
    data, want = load_run(root)["data"], judged(root)
    assert data["trace"] == TRACE, f"{RUN}: trace {data['trace']!r}, analysis.py's is {TRACE!r}"
    assert (data["num_gpus"], data["max_decode_batch"]) == (NUM_GPUS, MAX_DECODE_BATCH), (
        f"{RUN}: num_gpus {data['num_gpus']!r}, max_decode_batch {data['max_decode_batch']!r}; "
        f"analysis.py's are {NUM_GPUS} and {MAX_DECODE_BATCH}")
    slo = data["slo"]
    assert isinstance(slo, dict) and [slo.get("ttft_s"), slo.get("tpot_s")] == pytest.approx(list(want["slo"]), rel=1e-9), (
        f"{RUN}: slo {slo!r}, but your points give TTFT <= {want['slo'][0]} s and TPOT <= {want['slo'][1]} s "
        f"(5 x prefill_s(median prompt), 3 x decode_s(8), 3 significant digits)")
    rates = data["rates"]
    assert isinstance(rates, list) and len(rates) == len(want["rates"]) and rates == pytest.approx(want["rates"], rel=1e-9), (
        f"{RUN}: rates {rates!r:.300}, but your points give {want['rates']} "
        f"(1 / prefill_s(mean prompt) x 2 ** (k / 4), k = -8 .. 8, 3 significant digits)")
