"""Chunked prefill's claim, measured: replay a request trace through the P1 engine and read each
request's token times, the decode stalls of every step, and the latency percentiles."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from minivllm import LLM, SamplingParams


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: when it arrives (seconds after the replay starts), its prompt, and
    how many tokens it generates (EOS ignored)."""

    arrival_s: float
    prompt_ids: tuple[int, ...]
    max_tokens: int


@dataclass(frozen=True)
class StepRecord:
    """One engine step. start, end: seconds after the replay started.

    prefill_tokens, decode_tokens: tokens the step computed for prompts and for decodes.
    stalled: requests that had generated at least one token and were not finished, yet got no
        token in this step (a decode stalled behind prefill work or preempted).
    """

    start: float
    end: float
    prefill_tokens: int
    decode_tokens: int
    stalled: int


@dataclass(frozen=True)
class Replay:
    """steps: every step in order. token_times[i]: the end time of the step that produced each token
    of request i (the trace's order), seconds after the start, max_tokens of them."""

    steps: tuple[StepRecord, ...]
    token_times: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class LatencyStats:
    """tpot_*: percentiles over requests of (last token - first token) / (n - 1) (requests with
    n >= 2 tokens). itl_*: over every gap between consecutive tokens of a request, all requests
    pooled. Percentiles as numpy.percentile's default (linear). throughput: tokens of all
    requests / the last token's time (tokens per second)."""

    tpot_p50: float
    tpot_p99: float
    itl_p99: float
    itl_max: float
    throughput: float


def replay(llm: LLM, requests: Sequence[TraceRequest], *,
           clock: Callable[[], float] = time.perf_counter) -> Replay:
    """Serve `requests` with `llm` as they arrive; return what every step did and when every token came.

    t0 = clock() at the start. Before each step, add (llm.add_request(list(prompt_ids),
    SamplingParams(temperature=0, max_tokens=..., ignore_eos=True))) every request not yet added whose
    arrival_s <= clock() - t0, in trace order; when the engine then has nothing to do, sleep until the
    next arrival. A step: start = clock() - t0, llm.step(), end = clock() - t0. Which requests got a
    token in the step: the entries of the step's kvcache.Batch that sample (`e.samples`), read through
    `llm.on_step` (restore the hook you found when you return). Ends when every request has its tokens.
    """
    raise NotImplementedError("p7.8: replay")


def latency_stats(result: Replay) -> LatencyStats:
    """The LatencyStats of a replay. ValueError when no request has two tokens."""
    raise NotImplementedError("p7.9: latency_stats")


def plot_timeline(result: Replay, path: str, title: str = "") -> None:
    """A PNG at `path`: one bar per step along time (x: seconds), its height the step's prefill tokens
    and decode tokens stacked, the steps with stalled decodes marked. Uses matplotlib (Agg)."""
    raise NotImplementedError("p7.10: plot_timeline")
