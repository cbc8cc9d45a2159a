"""Hidden: the metrics' edge cases (one output token, failed requests, each SLO alone, no SLO),
the percentile at the ends and on one value, and the arrivals' validation and mean rate."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from serving import SLO, RequestRecord, meets, percentile, poisson_arrivals, summarize, tpot


@pytest.mark.points(1)
def test_tpot_of_one_token_is_zero():
    assert tpot(RequestRecord(1.0, 1.5, 1.5, 1, 10)) == 0.0, "one output token: no gap, TPOT 0"
    assert tpot(RequestRecord(1.0, 1.5, 1.9, 2, 10)) == pytest.approx(0.4), "two tokens: one gap of 0.4 s"


@pytest.mark.points(2)
def test_goodput_needs_every_slo_and_skips_failures(tol):
    fast_first = RequestRecord(0.0, 0.05, 2.05, 11, 5)    # TTFT 0.05, TPOT 0.2
    slow_first = RequestRecord(0.5, 1.5, 1.6, 11, 5)      # TTFT 1.0, TPOT 0.01
    both = RequestRecord(1.0, 1.05, 1.15, 11, 5)          # TTFT 0.05, TPOT 0.01
    failed = RequestRecord(1.2, 1.2, 3.0, 0, 0, ok=False)
    recs = [fast_first, slow_first, both, failed]
    slo = SLO(ttft_s=0.1, tpot_s=0.05)
    assert [meets(r, slo) for r in recs] == [False, False, True, False], "each SLO alone is not enough; a failure never counts"
    s = summarize(recs, slo)
    assert s.num_ok == 3 and s.num_good == 1, f"ok {s.num_ok} (want 3), good {s.num_good} (want 1)"
    assert s.duration_s == pytest.approx(3.0), "duration spans every request, failed ones too"
    assert s.goodput == pytest.approx(1 / 3.0) and s.request_throughput == pytest.approx(1.0)
    assert s.output_throughput == pytest.approx(33 / 3.0), "output tokens of ok requests / duration"
    assert summarize(recs, SLO()).num_good == 3, "no SLO set: every ok request is good"
    assert summarize(recs, SLO(e2e_s=1.2)).num_good == 2, "end-to-end latency <= 1.2 s: two requests (2.05 s, 1.1 s, 0.15 s)"


@pytest.mark.points(1)
def test_a_request_exactly_at_its_bounds_meets_them():
    at = RequestRecord(0.0, 0.25, 1.25, 5, 3)  # TTFT 0.25, TPOT (1.25 - 0.25) / 4 = 0.25, latency 1.25: exact in binary
    for slo in (SLO(ttft_s=0.25), SLO(tpot_s=0.25), SLO(e2e_s=1.25), SLO(ttft_s=0.25, tpot_s=0.25, e2e_s=1.25)):
        assert meets(at, slo), f"{slo}: a request exactly at a bound meets it (the handout's <=)"


@pytest.mark.points(1)
def test_percentile_edges():
    assert percentile([3.0], 99) == 3.0
    assert math.isnan(percentile([], 50))
    xs = [5.0, 1.0, 4.0, 2.0]
    assert percentile(xs, 0) == 1.0 and percentile(xs, 100) == 5.0
    assert percentile(xs, 50) == pytest.approx(float(np.percentile(xs, 50)))
    with pytest.raises(ValueError):
        percentile(xs, 101)


@pytest.mark.points(1)
def test_arrivals_validate_and_average_the_rate():
    with pytest.raises(ValueError):
        poisson_arrivals(0.0, 5, 1)
    with pytest.raises(ValueError):
        poisson_arrivals(2.0, 0, 1)
    a = poisson_arrivals(10.0, 4000, 123)
    assert all(x < y for x, y in itertools.pairwise(a)), "arrival times increase"
    assert 4000 / a[-1] == pytest.approx(10.0, rel=0.06), f"mean rate {4000 / a[-1]:.2f} /s for rate 10"
