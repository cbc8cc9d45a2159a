"""The SLO metrics against the same formulas computed here from the same timestamps (records drawn
here), and the Poisson arrival times against the handout's numpy contract."""

from __future__ import annotations

import random

import numpy as np
import pytest
from serving import SLO, RequestRecord, percentile, poisson_arrivals, summarize, tpot, ttft


def draw_records(seed: int, count: int) -> list[tuple]:
    """(send, first, end, n_out, n_prompt) tuples: sends over 2 s, TTFT 5-400 ms, 1-40 tokens."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        send = rng.uniform(0, 2.0) + 1000.0
        first = send + rng.uniform(0.005, 0.4)
        n = rng.randint(1, 40)
        end = first + (n - 1) * rng.uniform(0.002, 0.05)
        out.append((send, first, end, n, rng.randint(1, 200)))
    return out


def want_tpot(rec: tuple) -> float:
    send, first, end, n, _ = rec
    return 0.0 if n < 2 else ((end - send) - (first - send)) / (n - 1)


@pytest.mark.points(2)
def test_ttft_and_tpot_follow_the_definitions(tol):
    t = tol("metrics")
    for rec in draw_records(1, 50):
        r = RequestRecord(*rec)
        assert ttft(r) == pytest.approx(rec[1] - rec[0], rel=t["rtol"], abs=t["atol"]), f"TTFT of {rec}"
        assert tpot(r) == pytest.approx(want_tpot(rec), rel=t["rtol"], abs=t["atol"]), (
            f"TPOT of {rec}: want (latency - TTFT) / (n - 1) = {want_tpot(rec)}, got {tpot(r)}")


@pytest.mark.points(2)
@pytest.mark.parametrize("q", [0, 50, 90, 99, 100])
def test_percentile_interpolates_like_numpy(q, tol):
    values = [r[1] - r[0] for r in draw_records(2, 37)]
    want = float(np.percentile(values, q))
    assert percentile(values, q) == pytest.approx(want, rel=tol("metrics")["rtol"]), f"p{q} of 37 values"


@pytest.mark.points(3)
def test_goodput_counts_requests_meeting_every_slo(tol):
    recs = draw_records(3, 60)
    slo = SLO(ttft_s=0.2, tpot_s=0.03)
    s = summarize([RequestRecord(*r) for r in recs], slo)
    duration = max(r[2] for r in recs) - min(r[0] for r in recs)
    good = sum((r[1] - r[0]) <= 0.2 and want_tpot(r) <= 0.03 for r in recs)
    t = tol("metrics")
    assert s.duration_s == pytest.approx(duration, rel=t["rtol"]), "duration: last end - first send"
    assert s.num_good == good, f"{s.num_good} requests meet both SLOs, want {good} (TTFT <= 0.2 s and TPOT <= 0.03 s)"
    assert s.goodput == pytest.approx(good / duration, rel=t["rtol"]), "goodput = good requests / duration"
    assert s.ttft_p99 == pytest.approx(float(np.percentile([r[1] - r[0] for r in recs], 99)), rel=t["rtol"])
    assert s.tpot_p50 == pytest.approx(float(np.percentile([want_tpot(r) for r in recs], 50)), rel=t["rtol"])


@pytest.mark.points(2)
def test_poisson_arrivals_follow_the_numpy_contract(tol):
    got = poisson_arrivals(4.0, 200, seed=7)
    want = np.cumsum(np.random.default_rng(7).exponential(1 / 4.0, 200))
    assert len(got) == 200, f"{len(got)} arrivals, want 200"
    np.testing.assert_allclose(got, want, rtol=tol("metrics")["rtol"],
                               err_msg="arrivals: cumsum of default_rng(seed).exponential(1 / rate, n)")
