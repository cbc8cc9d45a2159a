"""Replay a request trace through the scheduler under a roofline cost model, and measure it.

Nothing runs a model: each step's duration comes from `CostModel.step_time`, sampled tokens are
random ids, and the clock jumps from step to step (or to the next arrival when idle).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence as Seq
from dataclasses import dataclass, field

from .block_manager import BlockManager
from .scheduler import Batch, Scheduler, SchedulerConfig
from .sequence import Sequence


@dataclass(frozen=True)
class Request:
    """One trace record: arrives at arrival_time_s with prompt_len tokens, wants output_len tokens."""

    arrival_time_s: float
    prompt_len: int
    output_len: int

    def __post_init__(self) -> None:
        if not (self.arrival_time_s >= 0.0 and math.isfinite(self.arrival_time_s)):
            raise ValueError(f"arrival_time_s must be finite and >= 0, got {self.arrival_time_s}")
        if self.prompt_len < 1 or self.output_len < 1:
            raise ValueError(f"prompt_len and output_len must be >= 1, got {self.prompt_len}, {self.output_len}")


@dataclass(frozen=True)
class CostModel:
    """Roofline time of one step (defaults: a Llama-3-8B-like model in bf16 on one H200-class GPU,
    at achievable rather than peak rates).

    A step computes 2 * num_params FLOPs per token it feeds and reads all weights once, plus the
    K/V of every entry's context (start_pos + num_tokens tokens, kv_bytes_per_token each):
        step_time = overhead_s + max(flops / flops_per_s, bytes / bytes_per_s)
    Prefill-heavy steps are compute-bound (time grows with tokens); decode steps are memory-bound
    (time grows with weights + KV read).
    """

    num_params: float = 8.0e9
    weight_bytes: float = 16.0e9
    kv_bytes_per_token: float = 131072.0  # 2 (K, V) * 32 layers * 8 kv heads * 128 dims * 2 bytes
    flops_per_s: float = 600e12
    bytes_per_s: float = 4.0e12
    overhead_s: float = 1e-3

    def __post_init__(self) -> None:
        for name in ("num_params", "weight_bytes", "kv_bytes_per_token", "flops_per_s", "bytes_per_s", "overhead_s"):
            if not getattr(self, name) >= 0.0:
                raise ValueError(f"CostModel.{name} must be >= 0, got {getattr(self, name)}")
        if self.flops_per_s == 0.0 or self.bytes_per_s == 0.0:
            raise ValueError("CostModel rates must be positive")

    def step_time(self, batch: Batch) -> float:
        """Seconds one step takes (formula in the class docstring); 0.0 for an empty batch."""
        if not batch.entries:
            return 0.0
        flops = 2.0 * self.num_params * batch.num_tokens
        kv_tokens = sum(e.context_len for e in batch.entries)
        bytes_read = self.weight_bytes + self.kv_bytes_per_token * kv_tokens
        return self.overhead_s + max(flops / self.flops_per_s, bytes_read / self.bytes_per_s)


@dataclass(frozen=True)
class SimConfig:
    """What to simulate: scheduler knobs, the KV pool, the cost model, and the synthetic tokens.

    shared_prefix_len: the first min(shared_prefix_len, prompt_len) prompt tokens are the same for
        every request (a system prompt), so prefix caching has something to hit; the rest of each
        prompt and every sampled token are random ids drawn from `seed`.
    """

    scheduler: SchedulerConfig
    num_blocks: int
    block_size: int = 16
    watermark: float = 0.01
    enable_prefix_caching: bool = True
    cost: CostModel = field(default_factory=CostModel)
    shared_prefix_len: int = 0
    vocab_size: int = 32000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.shared_prefix_len < 0 or self.vocab_size < 2:
            raise ValueError("shared_prefix_len must be >= 0 and vocab_size >= 2")


@dataclass(frozen=True)
class RequestMetrics:
    """Latencies of one request, in seconds. tpot_s is None when output_len == 1."""

    seq_id: int
    arrival_s: float
    prompt_len: int
    output_len: int
    ttft_s: float
    tpot_s: float | None
    e2e_s: float
    num_preemptions: int


@dataclass(frozen=True)
class StepRecord:
    """One step: when it started, how long it took, what it held. kv_blocks_used is read right
    after scheduling (the peak of the step)."""

    start_s: float
    duration_s: float
    num_seqs: int
    num_prefill_tokens: int
    num_decode_tokens: int
    kv_blocks_used: int
    num_preempted: int


@dataclass(frozen=True)
class SimResult:
    requests: tuple[RequestMetrics, ...]  # in trace order
    steps: tuple[StepRecord, ...]
    num_blocks: int
    prefix_hit_rate: float


@dataclass(frozen=True)
class SimSummary:
    """Headline numbers. throughput_tok_s = output tokens / makespan, makespan = last finish -
    first arrival. kv_util_mean: time-weighted mean of kv_blocks_used / num_blocks over steps."""

    num_requests: int
    makespan_s: float
    throughput_tok_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    kv_util_mean: float
    kv_util_peak: float
    num_preemptions: int
    prefix_hit_rate: float


def as_requests(trace: Iterable[Request | Seq[float]]) -> list[Request]:
    """Accept Request objects or (arrival_time_s, prompt_len, output_len) records (given)."""
    out = []
    for r in trace:
        out.append(r if isinstance(r, Request) else Request(float(r[0]), int(r[1]), int(r[2])))
    return out


def percentile(values: Seq[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) with linear interpolation between closest ranks, as
    numpy.percentile's default: sort, h = (n - 1) * q / 100, interpolate between x[floor(h)] and
    x[ceil(h)]. ValueError on an empty input or q outside [0, 100]."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q must be in [0, 100], got {q}")
    xs = sorted(values)
    h = (len(xs) - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def _make_sequences(requests: list[Request], config: SimConfig) -> list[Sequence]:
    """Synthetic prompts: a shared prefix, then random ids (given)."""
    rng = random.Random(config.seed)
    shared = [rng.randrange(config.vocab_size) for _ in range(config.shared_prefix_len)]
    seqs = []
    for i, r in enumerate(requests):
        head = shared[: r.prompt_len]
        tail = [rng.randrange(config.vocab_size) for _ in range(r.prompt_len - len(head))]
        seqs.append(Sequence(i, head + tail, r.output_len, arrival_time=r.arrival_time_s))
    return seqs


def simulate(trace: Iterable[Request | Seq[float]], config: SimConfig) -> SimResult:
    """Replay trace (in arrival order; ties keep trace order) and measure it.

    Loop: add every request that has arrived by `now`; schedule; if the batch has no entries,
    schedule again if it preempted, jump `now` to the next arrival if one is pending, and raise
    RuntimeError otherwise (no progress). Else advance `now` by step_time, draw one random token
    per sampling entry, call update, and stamp first_token_time (first sampled token) and
    finish_time with the new `now`. Record a StepRecord for every non-empty step.
    TTFT = first_token_time - arrival; TPOT = (finish - first token) / (output_len - 1).
    """
    requests = sorted(as_requests(trace), key=lambda r: r.arrival_time_s)
    seqs = _make_sequences(requests, config)
    bm = BlockManager(
        config.num_blocks,
        config.block_size,
        watermark=config.watermark,
        enable_prefix_caching=config.enable_prefix_caching,
    )
    sched = Scheduler(config.scheduler, bm)
    rng = random.Random(config.seed + 1)
    by_id = {s.seq_id: s for s in seqs}
    steps: list[StepRecord] = []
    now, pending = (requests[0].arrival_time_s if requests else 0.0), 0
    while pending < len(seqs) or sched.has_unfinished():
        while pending < len(seqs) and seqs[pending].arrival_time <= now:
            sched.add(seqs[pending])
            pending += 1
        batch = sched.schedule()
        if not batch.entries:
            if batch.preempted:
                continue
            if pending < len(seqs):
                now = max(now, seqs[pending].arrival_time)
                continue
            raise RuntimeError("the scheduler made no progress with requests left")
        used = bm.num_used_blocks
        dt = config.cost.step_time(batch)
        start, now = now, now + dt
        tokens = {e.seq_id: rng.randrange(config.vocab_size) for e in batch.entries if e.samples}
        sched.update(batch, tokens)
        for seq_id in tokens:
            seq = by_id[seq_id]
            if seq.first_token_time is None:
                seq.first_token_time = now
            if seq.is_finished:
                seq.finish_time = now
        steps.append(
            StepRecord(start, dt, batch.num_seqs, batch.num_prefill_tokens, batch.num_decode_tokens, used, len(batch.preempted))
        )
    metrics = tuple(_request_metrics(s, r) for s, r in zip(seqs, requests))
    return SimResult(metrics, tuple(steps), config.num_blocks, bm.stats.hit_rate)


def _request_metrics(seq: Sequence, req: Request) -> RequestMetrics:
    """TTFT, TPOT and end-to-end latency of one finished sequence."""
    assert seq.first_token_time is not None and seq.finish_time is not None
    ttft = seq.first_token_time - seq.arrival_time
    n = seq.num_completion_tokens
    tpot = (seq.finish_time - seq.first_token_time) / (n - 1) if n > 1 else None
    return RequestMetrics(
        seq.seq_id, seq.arrival_time, req.prompt_len, n, ttft, tpot, seq.finish_time - seq.arrival_time, seq.num_preemptions
    )


def summarize(result: SimResult) -> SimSummary:
    """Headline numbers of a run (see SimSummary); TPOT percentiles skip requests whose tpot_s is
    None (nan if none has one). ValueError on a run without requests."""
    reqs = result.requests
    if not reqs:
        raise ValueError("no requests in this run")
    makespan = max(r.arrival_s + r.e2e_s for r in reqs) - min(r.arrival_s for r in reqs)
    ttft = [r.ttft_s for r in reqs]
    tpot = [r.tpot_s for r in reqs if r.tpot_s is not None]
    busy = sum(s.duration_s for s in result.steps)
    util = [s.kv_blocks_used / result.num_blocks for s in result.steps]
    return SimSummary(
        num_requests=len(reqs),
        makespan_s=makespan,
        throughput_tok_s=sum(r.output_len for r in reqs) / makespan if makespan > 0 else math.inf,
        ttft_p50_s=percentile(ttft, 50),
        ttft_p99_s=percentile(ttft, 99),
        tpot_p50_s=percentile(tpot, 50) if tpot else math.nan,
        tpot_p99_s=percentile(tpot, 99) if tpot else math.nan,
        kv_util_mean=sum(u * s.duration_s for u, s in zip(util, result.steps)) / busy if busy > 0 else 0.0,
        kv_util_peak=max(util, default=0.0),
        num_preemptions=sum(r.num_preemptions for r in reqs),
        prefix_hit_rate=result.prefix_hit_rate,
    )
