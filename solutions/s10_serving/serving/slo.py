"""Service-level objectives of a serving benchmark: per-request TTFT, TPOT and end-to-end latency,
their percentiles, and goodput (the rate of requests that met every SLO).

All times are `time.perf_counter()` readings of the client, in seconds:

    TTFT    = first_token_s - send_s                      (time to first token)
    latency = end_s - send_s                              (end to end)
    TPOT    = (latency - TTFT) / (n - 1)                  (time per output token after the first;
                                                           0.0 when n < 2: no gap to average)
    goodput = (ok requests meeting every SLO set) / duration_s,  duration_s = last end - first send
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RequestRecord:
    """One benchmark request as the client saw it."""

    send_s: float            # just before the request was sent
    first_token_s: float     # when the first chunk carrying text arrived
    end_s: float             # when "data: [DONE]" arrived
    num_output_tokens: int   # the usage's completion_tokens
    num_prompt_tokens: int   # the usage's prompt_tokens
    ok: bool = True          # False: the request failed (its times are not used)


@dataclass(frozen=True)
class SLO:
    """Bounds in seconds; None leaves that metric unconstrained."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"SLO {name} must be > 0 or None, got {value}")


@dataclass(frozen=True)
class Summary:
    num_requests: int
    num_ok: int
    num_good: int               # ok and meeting every SLO
    duration_s: float
    request_throughput: float   # ok requests / duration_s
    output_throughput: float    # output tokens of ok requests / duration_s
    goodput: float              # num_good / duration_s
    ttft_p50: float
    ttft_p99: float
    tpot_p50: float
    tpot_p99: float
    e2e_p50: float
    e2e_p99: float


def ttft(r: RequestRecord) -> float:
    return r.first_token_s - r.send_s


def latency(r: RequestRecord) -> float:
    return r.end_s - r.send_s


def tpot(r: RequestRecord) -> float:
    """(latency - TTFT) / (n - 1); 0.0 for fewer than two output tokens."""
    # BEGIN SOLUTION
    n = r.num_output_tokens
    if n < 2:
        return 0.0
    return (latency(r) - ttft(r)) / (n - 1)
    # END SOLUTION


def meets(r: RequestRecord, slo: SLO) -> bool:
    """True when r is ok and each SLO that is set holds (<=)."""
    # BEGIN SOLUTION
    if not r.ok:
        return False
    checks = ((slo.ttft_s, ttft(r)), (slo.tpot_s, tpot(r)), (slo.e2e_s, latency(r)))
    return all(bound is None or value <= bound for bound, value in checks)
    # END SOLUTION


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) with linear interpolation between the two nearest ranks
    (numpy's default): sorted x, position (len - 1) * q / 100. nan for an empty list."""
    # BEGIN SOLUTION
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
    # END SOLUTION


def summarize(records: list[RequestRecord], slo: SLO) -> Summary:
    """The benchmark's summary. Percentiles over the ok requests; duration from the first send to
    the last end over all requests. ValueError for no records or a duration that is not > 0."""
    # BEGIN SOLUTION
    if not records:
        raise ValueError("no records")
    duration = max(r.end_s for r in records) - min(r.send_s for r in records)
    if not duration > 0:
        raise ValueError(f"the benchmark's duration must be > 0, got {duration}")
    ok = [r for r in records if r.ok]
    good = sum(meets(r, slo) for r in ok)
    t, p, e = [ttft(r) for r in ok], [tpot(r) for r in ok], [latency(r) for r in ok]
    return Summary(len(records), len(ok), good, duration, len(ok) / duration,
                   sum(r.num_output_tokens for r in ok) / duration, good / duration,
                   percentile(t, 50), percentile(t, 99), percentile(p, 50), percentile(p, 99),
                   percentile(e, 50), percentile(e, 99))
    # END SOLUTION


def poisson_arrivals(rate: float, n: int, seed: int) -> list[float]:
    """n arrival times (seconds from the start) of a Poisson process of `rate` requests/s: the
    cumulative sums of n exponential gaps of mean 1/rate, drawn as
    numpy.random.default_rng(seed).exponential(1 / rate, n). ValueError for rate <= 0 or n < 1."""
    # BEGIN SOLUTION
    if not rate > 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, n)
    return np.cumsum(gaps).tolist()
    # END SOLUTION
