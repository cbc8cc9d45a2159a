"""What the card can do, measured in the same run: a measurement past it is held, never credited.

A perf test declares the work of one call (`Work(flops=..., bytes=...)`: what any correct call
must do, not what a given kernel happens to do). The judge measures two ceilings on the same
device in this process: the FLOP/s of a large bf16 GEMM (fp32 on CPU) and the copy bandwidth
(bytes read plus written by `dst.copy_(src)`), each the best of several repetitions. A graded
time that implies more than `MARGIN` times either ceiling is no kernel's doing but a cache's or a
timer's: the test raises `HeldForReview` with the numbers, and an instructor decides.

Why MARGIN = 1.5: the ceilings are what cuBLAS and a copy reach, not the data sheet. On an H100
SXM a cuBLAS bf16 GEMM reaches 0.7-0.8 of the 989 TFLOP/s dense peak, and a copy 0.8-0.9 of the
3.35 TB/s of HBM3, so even a kernel at the data sheet's peak stays under 1.4x the measured
ceiling; a short kernel that runs at boost clocks while the long GEMM ran at its power limit gains
well under 10% more. The fakes seen so far claimed 10-20x. On a CPU (the demo course, the
grader's own tests) the ceilings are noisier, its cores shared with the grader and whatever else
runs: there the margin is CPU_MARGIN = 4 (an honest torch add reached 0.02-0.8 of the copy
ceiling on a loaded 2-core machine; a cached answer claims 10x and more).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from autograder.protocol.messages import HeldForReview

MARGIN = 1.5
CPU_MARGIN = 4.0
_measured: dict[str, Ceilings] = {}


@dataclass(frozen=True)
class Work:
    """The work one call must do: floating-point operations and/or bytes of memory traffic."""

    flops: float = 0.0
    bytes: float = 0.0

    def __post_init__(self) -> None:
        if self.flops < 0 or self.bytes < 0 or (self.flops == 0 and self.bytes == 0):
            raise ValueError(f"Work(flops={self.flops}, bytes={self.bytes}): give a positive flops and/or bytes")


@dataclass(frozen=True)
class Ceilings:
    """The best FLOP/s and copy bytes/s measured on `device` in this run."""

    flops_per_s: float
    bytes_per_s: float
    device: str


def of(device: Any = None) -> Ceilings:
    """The ceilings of `device` (the default CUDA device, or the CPU), measured once per process."""
    import torch

    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    key = str(dev)
    if key not in _measured:
        _measured[key] = _gpu(dev) if dev.type == "cuda" else _cpu(dev)
    return _measured[key]


def _gpu(dev: Any) -> Ceilings:
    return Ceilings(_gemm_flops_per_s(dev), _copy_bytes_per_s(dev), str(dev))


def _cpu(dev: Any) -> Ceilings:
    """On one thread, times the threads torch runs ops on: a loaded host stalls a many-threaded op
    at its slowest thread (measured 0.8 to 57 GB/s for one copy), a one-threaded op far less; and
    no op on n threads beats n times one thread."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return Ceilings(threads * _gemm_flops_per_s(dev), threads * _copy_bytes_per_s(dev), str(dev))
    finally:
        torch.set_num_threads(threads)


def margin(device: Any = None) -> float:
    """How many times a ceiling a rate may reach before it is held: MARGIN on a GPU, CPU_MARGIN on a CPU."""
    return CPU_MARGIN if of(device).device == "cpu" else MARGIN


def check(work: Work | None, seconds: float, device: Any = None, what: str = "the timed call") -> None:
    """HeldForReview when `work` done in `seconds` implies more than margin() x a ceiling of the device."""
    if work is None:
        return
    limits, times = of(device), margin(device)
    rate_flops, rate_bytes = work.flops / max(seconds, 1e-12), work.bytes / max(seconds, 1e-12)
    past = []
    if work.flops and rate_flops > times * limits.flops_per_s:
        past.append(f"{rate_flops / 1e12:.3g} TFLOP/s against a measured GEMM ceiling of "
                    f"{limits.flops_per_s / 1e12:.3g}")
    if work.bytes and rate_bytes > times * limits.bytes_per_s:
        past.append(f"{rate_bytes / 1e12:.3g} TB/s against a measured copy ceiling of {limits.bytes_per_s / 1e12:.3g}")
    if past:
        raise HeldForReview(
            f"{what} took {seconds * 1e6:.1f} us per call on {limits.device}, which implies "
            + " and ".join(past) + f" (over {times:g}x what this device did in the same run): no kernel is that "
            "fast; a cached answer or a timer that under-reports is. Held for an instructor's review")


def _best_rate(fn: Any, units: float, dev: Any, reps: int) -> float:
    """units / the fastest of `reps` timed calls of fn (after one untimed), timed with events on CUDA."""
    import torch

    fn()
    best = float("inf")
    for _ in range(reps):
        if dev.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
    return units / best


def _gemm_flops_per_s(dev: Any) -> float:
    import torch

    n, dtype = (8192, torch.bfloat16) if dev.type == "cuda" else (256, torch.float32)
    a = torch.randn(n, n, device=dev).to(dtype)
    b = torch.randn(n, n, device=dev).to(dtype)
    return _best_rate(lambda: a @ b, 2 * n**3, dev, 10 if dev.type == "cuda" else 20)


def _copy_bytes_per_s(dev: Any) -> float:
    import torch

    nbytes = 1 << 30 if dev.type == "cuda" else 1 << 23  # CPU: short copies, the best of many (a loaded host)
    src = torch.ones(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    return _best_rate(lambda: dst.copy_(src), 2 * nbytes, dev, 10 if dev.type == "cuda" else 40)
