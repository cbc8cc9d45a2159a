"""The GPU's timeline: busy and idle time, the gaps between work, and a per-kernel table."""

from __future__ import annotations

from dataclasses import dataclass

from .events import Event, gpu_events


@dataclass(frozen=True)
class Breakdown:
    """Over the span from the first GPU event's start to the last one's end (microseconds):
    busy_us = the union of all GPU events' intervals; idle_us = span_us - busy_us;
    compute_us = the union of the "kernel" events alone (copies and memsets excluded)."""

    span_us: float
    busy_us: float
    idle_us: float
    compute_us: float

    @property
    def idle_fraction(self) -> float:
        return self.idle_us / self.span_us


@dataclass(frozen=True)
class KernelStat:
    """All launches of one kernel name: count, total/mean/min/max duration in microseconds."""

    count: int
    total_us: float
    mean_us: float
    min_us: float
    max_us: float


@dataclass(frozen=True)
class Gap:
    """The GPU idle from `start` to `end` (us): `before` is the GPU event that ended last before the
    gap (ending at `start`), `after` the one that starts at `end`."""

    start: float
    end: float
    before: Event
    after: Event

    @property
    def dur(self) -> float:
        return self.end - self.start


def merge_intervals(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of [start, end) intervals as disjoint intervals sorted by start. Intervals that
    touch (one's end equals the next's start) merge; zero-length intervals count like any other."""
    # BEGIN SOLUTION
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]
    # END SOLUTION


def temporal_breakdown(events: list[Event]) -> Breakdown:
    """Busy, idle and compute time of the GPU work in `events` (all devices and streams together).
    Raises ValueError when there is no GPU event."""
    # BEGIN SOLUTION
    gpu = gpu_events(events)
    if not gpu:
        raise ValueError("the trace has no GPU events: was it recorded with ProfilerActivity.CUDA?")
    merged = merge_intervals([(e.ts, e.end) for e in gpu])
    busy = sum(e - s for s, e in merged)
    compute = sum(e - s for s, e in merge_intervals([(e.ts, e.end) for e in gpu if e.cat == "kernel"]))
    span = merged[-1][1] - merged[0][0]
    return Breakdown(span_us=span, busy_us=busy, idle_us=span - busy, compute_us=compute)
    # END SOLUTION


def kernel_table(events: list[Event]) -> dict[str, KernelStat]:
    """name -> KernelStat over the GPU events (kernels, copies and memsets, by their full names)."""
    # BEGIN SOLUTION
    durs: dict[str, list[float]] = {}
    for e in gpu_events(events):
        durs.setdefault(e.name, []).append(e.dur)
    return {n: KernelStat(len(d), sum(d), sum(d) / len(d), min(d), max(d)) for n, d in durs.items()}
    # END SOLUTION


def gaps(events: list[Event], min_us: float = 0.0) -> list[Gap]:
    """The GPU's idle intervals longer than `min_us` between its busy intervals (all streams merged),
    in time order. `before` is the GPU event whose end is the gap's start (of several, the one that
    started last), on whatever stream; `after` the GPU event starting at the gap's end (of several,
    the one that ends first)."""
    # BEGIN SOLUTION
    gpu = gpu_events(events)
    merged = merge_intervals([(e.ts, e.end) for e in gpu])
    out = []
    for (_, a_end), (b_start, _) in zip(merged, merged[1:]):
        if b_start - a_end > min_us:
            before = max((e for e in gpu if e.end == a_end), key=lambda e: e.ts)
            after = min((e for e in gpu if e.ts == b_start), key=lambda e: e.end)
            out.append(Gap(a_end, b_start, before, after))
    return out
    # END SOLUTION
