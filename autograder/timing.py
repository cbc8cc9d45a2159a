"""The course's trusted timer: warm-up, L2 flush, CUDA events, median of many repetitions.

Perf tests time the student's code and a baseline with the same `measure` in the same run, and grade
the ratio. On CPU it falls back to `time.perf_counter` (reported, never asserted on in CPU tests).

Inside a graded test of an assignment with accounting rules, the warm-up and timed repetitions
record nothing (so the student's code and an oracle baseline are timed alike), and one more call
after them is the perf audit: profiled with its host ops, Triton launches and, on CUDA, device kernel names.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from autograder import accounting

# Larger than the L2 of any current GPU (H100/H200: 50 MB), so one write evicts it.
L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Timing:
    """Seconds per call over `reps` timed repetitions (after warm-up)."""

    median_s: float
    mean_s: float
    stdev_s: float
    min_s: float
    p10_s: float
    p90_s: float
    reps: int

    @classmethod
    def from_samples(cls, samples: list[float]) -> Timing:
        if not samples:
            raise ValueError("no timing samples: reps must be at least 1")
        ordered = sorted(samples)
        pick = lambda q: ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]  # noqa: E731
        return cls(
            median_s=statistics.median(ordered),
            mean_s=statistics.fmean(ordered),
            stdev_s=statistics.stdev(ordered) if len(ordered) > 1 else 0.0,
            min_s=ordered[0],
            p10_s=pick(0.1),
            p90_s=pick(0.9),
            reps=len(ordered),
        )


def _cuda_device(device: object | None) -> object | None:
    import torch

    if device is not None:
        dev = torch.device(device)
        return dev if dev.type == "cuda" else None
    return torch.device("cuda") if torch.cuda.is_available() else None


def measure(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    reps: int = 20,
    flush_l2: bool = True,
    device: object | None = None,
) -> Timing:
    """Time `fn()`; on CUDA with events around each call, flushing L2 before each repetition."""
    if warmup < 0 or reps < 1:
        raise ValueError(f"measure: warmup={warmup} must be >= 0 and reps={reps} >= 1")
    cuda = _cuda_device(device)
    acct = accounting.current()
    if acct is None or not acct.recording:  # no rules, or the test's oracle is being timed
        return _timed(fn, warmup, reps, flush_l2, cuda)
    with acct.paused():
        timing = _timed(fn, warmup, reps, flush_l2, cuda)
    acct.audit(fn, cuda=cuda is not None)
    if hits := acct.forbidden_hits():  # no credit can follow: stop the test now, not after its sweep
        raise RuntimeError("perf audit: " + "; ".join(hits))
    return timing


def _timed(fn: Callable[[], object], warmup: int, reps: int, flush_l2: bool, cuda: object | None) -> Timing:
    if cuda is None:
        return _measure_cpu(fn, warmup, reps)
    return _measure_cuda(fn, warmup, reps, flush_l2, cuda)


def _measure_cpu(fn: Callable[[], object], warmup: int, reps: int) -> Timing:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return Timing.from_samples(samples)


def _measure_cuda(fn: Callable[[], object], warmup: int, reps: int, flush_l2: bool, device: object) -> Timing:
    import torch

    scratch = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device) if flush_l2 else None
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize(device)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if scratch is not None:
            scratch.zero_()  # evict the previous repetition's data from L2
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize(device)
    return Timing.from_samples([s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends, strict=True)])


def copy_bandwidth(nbytes: int = 1 << 30, *, device: object | None = None, warmup: int = 3,
                   reps: int = 20) -> float:
    """Copy bandwidth of `dst.copy_(src)` on `nbytes`-byte tensors, in bytes/s read plus written:
    the same-run ceiling perf tests divide by."""
    import torch

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    src = torch.ones(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    timing = measure(lambda: dst.copy_(src), warmup=warmup, reps=reps, device=dev)
    return 2 * nbytes / timing.median_s
