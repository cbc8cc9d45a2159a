"""The analysis of README "Analysis": each number in answers/slo_numbers.toml against the same
quantity recomputed here, with the handout's formulas (the grader's own code, not yours), from
your own run in answers/slo_run.json."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autograder.testing import AnswerProblem, numeric_answer, read_answer

RATES = (2, 4, 8, 16, 32)


def load_run(root) -> dict:
    try:
        data = json.loads(read_answer(root, "answers/slo_run.json", 4 << 20))
        runs = {int(r["rate"]): [tuple(rec) for rec in r["records"]] for r in data["runs"]}
        slo = (float(data["slo"]["ttft_s"]), float(data["slo"]["tpot_s"]))
    except (ValueError, KeyError, TypeError) as e:
        raise AnswerProblem(f"answers/slo_run.json is not the run analysis.py writes: {e!r}") from None
    missing = [r for r in RATES if r not in runs or not runs[r]]
    if missing:
        raise AnswerProblem(f"answers/slo_run.json has no records at rate(s) {missing}")
    return {"runs": runs, "slo": slo}


def judge_summary(records: list[tuple], slo: tuple[float, float]) -> dict:
    ok = [r for r in records if r[5]]
    ttft = [r[1] - r[0] for r in ok]
    tpot = [0.0 if r[3] < 2 else ((r[2] - r[0]) - (r[1] - r[0])) / (r[3] - 1) for r in ok]
    good = sum(t <= slo[0] and p <= slo[1] for t, p in zip(ttft, tpot))
    duration = max(r[2] for r in records) - min(r[0] for r in records)
    return {"goodput": good / duration, "ttft_p99": float(np.percentile(ttft, 99)),
            "tpot_p99": float(np.percentile(tpot, 99))}


KEYS = [(f"goodput_at_{r}", r, "goodput") for r in RATES] + [("ttft_p99_at_32", 32, "ttft_p99"),
                                                             ("tpot_p99_at_32", 32, "tpot_p99")]


@pytest.mark.points(1)
@pytest.mark.parametrize("key,rate,field", KEYS, ids=[k[0] for k in KEYS])
def test_numeric_answer_matches_your_run(key, rate, field, request, tol):
    root = request.config.rootpath
    got = numeric_answer(root, "slo_numbers", key)
    run = load_run(root)
    want = judge_summary(run["runs"][rate], run["slo"])[field]
    assert got == pytest.approx(want, rel=tol("numeric answer")["rtol"], abs=1e-9), (
        f"{key}: you wrote {got}, your answers/slo_run.json gives {want:.4g}")
