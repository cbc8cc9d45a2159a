"""A DistServe-style placement simulator: how many prefill and decode instances serve a trace best.

Pure Python. Times are seconds, lengths tokens. The rules of `simulate` (the tests hold you to
them exactly):
1. Prefill: requests are taken in arrival order (ties: trace index), first come first served.
   Each prefill instance runs one prefill at a time (no batching). A request starts at
   max(its arrival, the time the earliest-free prefill instance becomes free), on that instance
   (ties between instances: lowest index). Its first token is produced at
   start + prefill_s(prompt_len).
2. output_len == 1: the request finishes at its first token; it never reaches a decode instance.
3. Otherwise its KV is ready on the decode side at first_token + transfer_s(prompt_len). At that
   ready time it is dispatched to the decode instance with the fewest unfinished requests
   (dispatched there, finish time > the ready time: a request finishing exactly at the ready time
   no longer counts); ties: lowest index. Dispatches are processed in order of ready time (ties:
   trace index).
4. A decode instance runs steps back to back. When it is idle and holds waiting requests, a step
   starts at once. A step started at time t takes decode_s(b), b = the number of requests in it:
   up to max_decode_batch requests, those that have started decoding first (keeping their
   order), then waiting ones in dispatch order. A request whose ready time is <= t can join the
   step starting at t (so one ready exactly at a step's end joins the next step). Each request in
   a step gets one token at the step's end; a request needs output_len - 1 decode tokens; it
   finishes at the end of the step that gives its last one and leaves the batch.
5. TTFT excludes the transfer (the first token comes from prefill); TPOT = (finish - first token)
   / (output_len - 1) includes the transfer and the queueing.

A trace is a sequence of `SimRequest`s or of any objects with the attributes `arrival_s`,
`prompt_len` and `output_len` (the course's `coursedata.traces.TraceRequest`), in any order.
"""

from __future__ import annotations

import heapq
import itertools
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


def _check(ok: bool, name: str, value: Any, rule: str) -> None:
    if not ok:
        raise ValueError(f"{name} must be {rule}, got {value!r}")


@dataclass(frozen=True)
class LatencyModel:
    """Linear phase costs of one instance. All >= 0; prefill_base_s + prefill_per_token_s > 0 and
    decode_base_s + decode_per_seq_s > 0 (ValueError naming the field and value otherwise)."""

    prefill_base_s: float
    prefill_per_token_s: float
    decode_base_s: float
    decode_per_seq_s: float
    transfer_per_token_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("prefill_base_s", "prefill_per_token_s", "decode_base_s", "decode_per_seq_s",
                     "transfer_per_token_s"):
            value = getattr(self, name)
            _check(value >= 0, name, value, ">= 0")
        _check(self.prefill_base_s + self.prefill_per_token_s > 0, "prefill_base_s + prefill_per_token_s",
               self.prefill_base_s + self.prefill_per_token_s, "> 0")
        _check(self.decode_base_s + self.decode_per_seq_s > 0, "decode_base_s + decode_per_seq_s",
               self.decode_base_s + self.decode_per_seq_s, "> 0")

    def prefill_s(self, prompt_len: int) -> float:
        """One prefill of a `prompt_len`-token prompt, alone on an instance:
        prefill_base_s + prefill_per_token_s * prompt_len."""
        return self.prefill_base_s + self.prefill_per_token_s * prompt_len

    def decode_s(self, batch: int) -> float:
        """One decode step of a batch of `batch` sequences: decode_base_s + decode_per_seq_s * batch."""
        return self.decode_base_s + self.decode_per_seq_s * batch

    def transfer_s(self, prompt_len: int) -> float:
        """Moving a `prompt_len`-token KV cache from prefill to decode: transfer_per_token_s * prompt_len."""
        return self.transfer_per_token_s * prompt_len


@dataclass(frozen=True)
class Placement:
    """num_prefill prefill instances and num_decode decode instances (each >= 1), one GPU each."""

    num_prefill: int
    num_decode: int

    def __post_init__(self) -> None:
        _check(self.num_prefill >= 1, "num_prefill", self.num_prefill, ">= 1")
        _check(self.num_decode >= 1, "num_decode", self.num_decode, ">= 1")

    @property
    def num_gpus(self) -> int:
        """num_prefill + num_decode."""
        return self.num_prefill + self.num_decode


@dataclass(frozen=True)
class SLO:
    """Latency targets: a request attains the SLO when ttft_s <= ttft_s and tpot_s <= tpot_s (> 0)."""

    ttft_s: float
    tpot_s: float

    def __post_init__(self) -> None:
        _check(self.ttft_s > 0, "ttft_s", self.ttft_s, "> 0")
        _check(self.tpot_s > 0, "tpot_s", self.tpot_s, "> 0")


@dataclass(frozen=True)
class SimRequest:
    """One request of a trace: arrival_s >= 0, prompt_len >= 1, output_len >= 1 (tokens, counting
    the first token, which prefill produces)."""

    arrival_s: float
    prompt_len: int
    output_len: int

    def __post_init__(self) -> None:
        _check(self.arrival_s >= 0, "arrival_s", self.arrival_s, ">= 0")
        _check(self.prompt_len >= 1, "prompt_len", self.prompt_len, ">= 1")
        _check(self.output_len >= 1, "output_len", self.output_len, ">= 1")


@dataclass(frozen=True)
class RequestTiming:
    """What `simulate` reports for the request at trace position `index`. decode_instance is the
    decode instance it was dispatched to (0-based), None when output_len == 1."""

    index: int
    arrival_s: float
    first_token_s: float
    finish_s: float
    output_len: int
    decode_instance: int | None

    @property
    def ttft_s(self) -> float:
        """first_token_s - arrival_s."""
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """(finish_s - first_token_s) / (output_len - 1); 0.0 when output_len == 1."""
        if self.output_len == 1:
            return 0.0
        return (self.finish_s - self.first_token_s) / (self.output_len - 1)


@dataclass(frozen=True)
class PlacementResult:
    """A placement's goodput (requests/s) and per_gpu = goodput / placement.num_gpus."""

    placement: Placement
    goodput: float
    per_gpu: float


def _as_requests(trace: Iterable[Any]) -> list[SimRequest]:
    """The trace as SimRequests, in trace order (duck typing on arrival_s, prompt_len, output_len;
    validated as SimRequest)."""
    return [SimRequest(r.arrival_s, r.prompt_len, r.output_len) for r in trace]


@dataclass
class _DecodeInstance:
    """One decode instance while simulating: running = [index, tokens left] in the order they
    started decoding; waiting = (index, ready time, tokens left) in dispatch order; finishes =
    finish times of requests that left, in time order."""

    model: LatencyModel
    cap: int
    finish: dict[int, float]
    free_at: float = 0.0
    running: list[list[int]] = field(default_factory=list)
    waiting: deque[tuple[int, float, int]] = field(default_factory=deque)
    finishes: list[float] = field(default_factory=list)

    def advance(self, until: float) -> None:
        """Run every step that starts before `until` (every request that may join one is here)."""
        raise NotImplementedError("p5.8: _DecodeInstance.advance")

    def step(self, t: float) -> None:
        """One step starting at t: the running requests, then waiting ones ready by t, up to cap."""
        raise NotImplementedError("p5.9: _DecodeInstance.step")

    def load(self, t: float) -> int:
        """Requests dispatched here whose finish time is > t (call after advance(t))."""
        raise NotImplementedError("p5.10: _DecodeInstance.load")


def _first_tokens(reqs: list[SimRequest], num_prefill: int, model: LatencyModel) -> list[float]:
    """Rule 1: each request's first-token time, by trace index."""
    raise NotImplementedError("p5.11: _first_tokens")


def simulate(trace: Sequence[Any], placement: Placement, model: LatencyModel,
             max_decode_batch: int) -> list[RequestTiming]:
    """Serve `trace` on `placement` under `model` by the module's rules; one RequestTiming per
    request, in trace order (an empty trace gives []). ValueError if max_decode_batch < 1."""
    _check(max_decode_batch >= 1, "max_decode_batch", max_decode_batch, ">= 1")
    reqs = _as_requests(trace)
    raise NotImplementedError("p5.12: simulate")


def attainment(timings: Sequence[RequestTiming], slo: SLO) -> float:
    """The fraction of requests with ttft_s <= slo.ttft_s and tpot_s <= slo.tpot_s (a one-token
    request is judged on TTFT only). ValueError on no timings."""
    raise NotImplementedError("p5.13: attainment")


def at_rate(trace: Sequence[Any], rate: float) -> list[SimRequest]:
    """The same requests (trace order, same lengths) with arrivals rescaled to a mean rate of
    `rate` requests/s: with a0 = the earliest and a1 = the latest arrival and n requests, arrival
    a becomes (a - a0) * (n - 1) / (rate * (a1 - a0)), so the first is at 0 and the last at
    (n - 1) / rate. ValueError if rate <= 0, n < 2 or a1 == a0 (no rate to scale)."""
    _check(rate > 0, "rate", rate, "> 0")
    reqs = _as_requests(trace)
    raise NotImplementedError("p5.14: at_rate")


def goodput(trace: Sequence[Any], placement: Placement, model: LatencyModel, slo: SLO,
            rates: Sequence[float], max_decode_batch: int, target: float = 0.9) -> float:
    """The largest rate r of `rates` (taken in ascending order) such that
    attainment(simulate(at_rate(trace, r), ...), slo) >= target at r and at every lower rate of
    the list; 0.0 if the lowest fails. ValueError on empty rates or target outside (0, 1]."""
    _check(len(rates) > 0, "rates", rates, "non-empty")
    _check(0 < target <= 1, "target", target, "in (0, 1]")
    raise NotImplementedError("p5.15: goodput")


def best_placement(trace: Sequence[Any], model: LatencyModel, slo: SLO, num_gpus: int,
                   rates: Sequence[float], max_decode_batch: int, target: float = 0.9) -> list[PlacementResult]:
    """Every Placement with num_prefill + num_decode <= num_gpus, each with its goodput and
    per_gpu = goodput / placement.num_gpus, sorted best first: per_gpu descending; ties: fewer
    GPUs first, then more prefill instances first. ValueError if num_gpus < 2."""
    _check(num_gpus >= 2, "num_gpus", num_gpus, ">= 2")
    raise NotImplementedError("p5.16: best_placement")


def _fit_line(points: Sequence[tuple[float, float]], phase: str) -> tuple[float, float]:
    """(intercept, slope) of the ordinary least-squares line through (x, y) points."""
    raise NotImplementedError("p5.17: _fit_line")


def fit_latency_model(prefill_points: Sequence[tuple[float, float]], decode_points: Sequence[tuple[float, float]],
                      transfer_per_token_s: float = 0.0) -> LatencyModel:
    """A LatencyModel from measurements: the ordinary least-squares line (intercept and slope)
    through the (prompt_tokens, seconds) prefill points gives prefill_base_s and
    prefill_per_token_s; through the (batch_size, seconds) decode points, decode_base_s and
    decode_per_seq_s. A negative fitted intercept or slope is clipped to 0. ValueError if a phase
    has fewer than two distinct x values (or, from LatencyModel, if a phase fits to all zeros)."""
    raise NotImplementedError("p5.18: fit_latency_model")
