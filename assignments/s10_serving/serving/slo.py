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
    raise NotImplementedError("s10.21: tpot")


def meets(r: RequestRecord, slo: SLO) -> bool:
    """True when r is ok and each SLO that is set holds (<=)."""
    raise NotImplementedError("s10.22: meets")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) with linear interpolation between the two nearest ranks
    (numpy's default): sorted x, position (len - 1) * q / 100. nan for an empty list."""
    raise NotImplementedError("s10.23: percentile")


def summarize(records: list[RequestRecord], slo: SLO) -> Summary:
    """The benchmark's summary. Percentiles over the ok requests; duration from the first send to
    the last end over all requests. ValueError for no records or a duration that is not > 0."""
    raise NotImplementedError("s10.24: summarize")


def poisson_arrivals(rate: float, n: int, seed: int) -> list[float]:
    """n arrival times (seconds from the start) of a Poisson process of `rate` requests/s: the
    cumulative sums of n exponential gaps of mean 1/rate, drawn as
    numpy.random.default_rng(seed).exponential(1 / rate, n). ValueError for rate <= 0 or n < 1."""
    raise NotImplementedError("s10.25: poisson_arrivals")
