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
    # BEGIN SOLUTION
    t0 = clock()
    batches: list = []
    hook = llm.on_step
    llm.on_step = lambda _llm, batch: batches.append(batch)
    try:
        order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)
        index_of: dict[int, int] = {}
        times: list[list[float]] = [[] for _ in requests]
        steps: list[StepRecord] = []
        nxt = 0
        while nxt < len(order) or llm.has_unfinished_requests():
            now = clock() - t0
            while nxt < len(order) and requests[order[nxt]].arrival_s <= now:
                r = requests[order[nxt]]
                sid = llm.add_request(list(r.prompt_ids), SamplingParams(temperature=0, max_tokens=r.max_tokens,
                                                                         ignore_eos=True))
                index_of[sid] = order[nxt]
                nxt += 1
            if not llm.has_unfinished_requests():
                time.sleep(max(0.0, requests[order[nxt]].arrival_s - (clock() - t0)))
                continue
            start = clock() - t0
            llm.step()
            end = clock() - t0
            batch = batches.pop()
            got = {index_of[e.seq_id] for e in batch.entries if e.samples}
            stalled = sum(1 for i in index_of.values()
                          if i not in got and 0 < len(times[i]) < requests[i].max_tokens)
            for i in got:
                times[i].append(end)
            prefill = batch.num_prefill_tokens
            steps.append(StepRecord(start, end, prefill, batch.num_tokens - prefill, stalled))
    finally:
        llm.on_step = hook
    return Replay(tuple(steps), tuple(tuple(t) for t in times))
    # END SOLUTION


def latency_stats(result: Replay) -> LatencyStats:
    """The LatencyStats of a replay. ValueError when no request has two tokens."""
    # BEGIN SOLUTION
    tpots = [(t[-1] - t[0]) / (len(t) - 1) for t in result.token_times if len(t) >= 2]
    if not tpots:
        raise ValueError("no request generated two tokens: TPOT is undefined")
    gaps = np.concatenate([np.diff(np.asarray(t, dtype=np.float64)) for t in result.token_times if len(t) >= 2])
    last = max(t[-1] for t in result.token_times if t)
    total = sum(len(t) for t in result.token_times)
    return LatencyStats(float(np.percentile(tpots, 50)), float(np.percentile(tpots, 99)),
                        float(np.percentile(gaps, 99)), float(gaps.max()), total / last)
    # END SOLUTION


def plot_timeline(result: Replay, path: str, title: str = "") -> None:
    """A PNG at `path`: one bar per step along time (x: seconds), its height the step's prefill tokens
    and decode tokens stacked, the steps with stalled decodes marked. Uses matplotlib (Agg)."""
    # BEGIN SOLUTION
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.2))
    for s in result.steps:
        width = max(s.end - s.start, 1e-6)
        ax.bar(s.start, s.prefill_tokens, width=width, align="edge", color="tab:orange")
        ax.bar(s.start, s.decode_tokens, width=width, bottom=s.prefill_tokens, align="edge", color="tab:blue")
        if s.stalled:
            ax.axvspan(s.start, s.end, color="tab:red", alpha=0.15, lw=0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("tokens in the step")
    ax.set_title(title or "steps: prefill (orange), decode (blue), decodes stalled (red)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    # END SOLUTION
