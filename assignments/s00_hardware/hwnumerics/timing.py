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
    raise NotImplementedError("s00.23: _percentile")


def summarize(times_s: Sequence[float]) -> BenchStats:
    """BenchStats of per-repetition times. The median of an even count is the mean of the middle
    two. ValueError if times_s is empty.
    """
    raise NotImplementedError("s00.24: summarize")


def _time_cpu(fn: Callable[[], object], warmup: int, reps: int) -> list[float]:
    """Call fn `warmup` times untimed, then `reps` times, each bracketed by time.perf_counter()."""
    raise NotImplementedError("s00.25: _time_cpu")


def _time_cuda(
    fn: Callable[[], object], warmup: int, reps: int, flush_l2: bool, device: torch.device
) -> list[float]:
    """Warm up, synchronise, then time each rep with a pair of CUDA events on the current stream.

    With flush_l2, a buffer of L2_FLUSH_BYTES is zeroed before each rep, outside the timed region,
    so every rep starts with a cold L2 (as a kernel inside a real model would). Synchronise once
    after all reps, then read the event pairs (elapsed_time is in milliseconds).
    """
    raise NotImplementedError("s00.26: _time_cuda")


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
    raise NotImplementedError("s00.27: benchmark")
