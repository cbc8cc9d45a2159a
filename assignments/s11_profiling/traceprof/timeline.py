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
    raise NotImplementedError("s11.18: merge_intervals")


def temporal_breakdown(events: list[Event]) -> Breakdown:
    """Busy, idle and compute time of the GPU work in `events` (all devices and streams together).
    Raises ValueError when there is no GPU event."""
    raise NotImplementedError("s11.19: temporal_breakdown")


def kernel_table(events: list[Event]) -> dict[str, KernelStat]:
    """name -> KernelStat over the GPU events (kernels, copies and memsets, by their full names)."""
    raise NotImplementedError("s11.20: kernel_table")


def gaps(events: list[Event], min_us: float = 0.0) -> list[Gap]:
    """The GPU's idle intervals longer than `min_us` between its busy intervals (all streams merged),
    in time order. `before` is the GPU event whose end is the gap's start (of several, the one that
    started last), on whatever stream; `after` the GPU event starting at the gap's end (of several,
    the one that ends first)."""
    raise NotImplementedError("s11.21: gaps")
