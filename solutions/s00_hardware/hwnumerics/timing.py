"""Timing a callable honestly: warm up, time every repetition, report the median and the spread.

GPU work is asynchronous: a kernel launch returns to Python long before the kernel finishes, so a
CPU clock read around `fn()` measures the launch, not the work. On CUDA we time with events
recorded on the stream and synchronise once before reading them; on CPU, time.perf_counter.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

# Bigger than the L2 of any current GPU (H100/H200: 50 MiB), so zeroing it evicts fn's data.
L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class BenchStats:
    """Summary of the per-repetition times (seconds) of one benchmark."""

    times_s: tuple[float, ...]  # one entry per timed repetition, in the order they ran
    median_s: float
    mean_s: float
    stdev_s: float  # sample standard deviation (divides by n - 1); 0.0 for a single rep
    min_s: float
    max_s: float
    p10_s: float  # 10th and 90th percentiles, linear interpolation (numpy's default)
    p90_s: float

    @property
    def reps(self) -> int:
        return len(self.times_s)


def _percentile(sorted_times: Sequence[float], q: float) -> float:
    """q in [0, 1]; linear interpolation between the two nearest ranks (numpy's default)."""
    # BEGIN SOLUTION
    pos = q * (len(sorted_times) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_times) - 1)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)
    # END SOLUTION


def summarize(times_s: Sequence[float]) -> BenchStats:
    """BenchStats of per-repetition times. The median of an even count is the mean of the middle
    two. ValueError if times_s is empty.
    """
    # BEGIN SOLUTION
    if len(times_s) == 0:
        raise ValueError("summarize needs at least one time")
    times = tuple(float(t) for t in times_s)
    ordered = sorted(times)
    n = len(ordered)
    mean = sum(ordered) / n
    stdev = math.sqrt(sum((t - mean) ** 2 for t in ordered) / (n - 1)) if n > 1 else 0.0
    return BenchStats(
        times_s=times,
        median_s=_percentile(ordered, 0.5),
        mean_s=mean,
        stdev_s=stdev,
        min_s=ordered[0],
        max_s=ordered[-1],
        p10_s=_percentile(ordered, 0.1),
        p90_s=_percentile(ordered, 0.9),
    )
    # END SOLUTION


def _time_cpu(fn: Callable[[], object], warmup: int, reps: int) -> list[float]:
    """Call fn `warmup` times untimed, then `reps` times, each bracketed by time.perf_counter()."""
    # BEGIN SOLUTION
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times
    # END SOLUTION


def _time_cuda(
    fn: Callable[[], object], warmup: int, reps: int, flush_l2: bool, device: torch.device
) -> list[float]:
    """Warm up, synchronise, then time each rep with a pair of CUDA events on the current stream.

    With flush_l2, a buffer of L2_FLUSH_BYTES is zeroed before each rep, outside the timed region,
    so every rep starts with a cold L2 (as a kernel inside a real model would). Synchronise once
    after all reps, then read the event pairs (elapsed_time is in milliseconds).
    """
    # BEGIN SOLUTION
    with torch.cuda.device(device):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device) if flush_l2 else None
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for start, end in zip(starts, ends):
            if flush is not None:
                flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) / 1e3 for start, end in zip(starts, ends)]
    # END SOLUTION


def benchmark(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    reps: int = 20,
    flush_l2: bool = True,
    device: str | torch.device | None = None,
) -> BenchStats:
    """Time `fn()` (no arguments) and summarise the `reps` timed calls.

    fn is called exactly warmup + reps times; the warm-up calls are not timed (they absorb
    compilation, autotuning, allocator growth and cold caches).
    device: where fn runs. None means "cuda" if torch.cuda.is_available() else "cpu".
      cuda: per-rep CUDA events, synchronise before reading them, optional L2 flush between reps.
      cpu:  time.perf_counter() around each call -- looked up on the `time` module at call time,
            so that a test can substitute a fake clock; flush_l2 is ignored.
    ValueError if warmup < 0 or reps < 1.
    """
    # BEGIN SOLUTION
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if device.type == "cuda":
        return summarize(_time_cuda(fn, warmup, reps, flush_l2, device))
    return summarize(_time_cpu(fn, warmup, reps))
    # END SOLUTION
