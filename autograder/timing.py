"""The course's timer for test authors: warm-up, L2 flush, CUDA events, median of many reps.

Perf tests time the student's code and a baseline with the same `measure` in the same run, and
grade the ratio. On CPU it falls back to `time.perf_counter` (reported, never asserted on in CPU
tests).

- In the judge, `measure(f)` of a worker callable (a function of the package, or what an
  `in_worker` helper returned, e.g. `lambda: flash_attention(q, k, v)`) times it in the worker,
  bracketed by the judge's clock, and audits one more call there (autograder/judge/bracket.py);
  `Timing.output` is what that call returned. `measure` of a judge function (the baseline, in
  `oracle()`) times it in the judge.
- In the worker (inside an `in_worker` function) with accounting rules, the warm-up and timed
  repetitions record nothing and one more call is the perf audit.
"""

from __future__ import annotations

from collections.abc import Callable

from autograder.testing import in_the_worker
from autograder.worker import accounting, timer
from autograder.worker.timer import L2_FLUSH_BYTES, Timing

__all__ = ["L2_FLUSH_BYTES", "Timing", "copy_bandwidth", "measure"]


def measure(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    reps: int = 20,
    flush_l2: bool = True,
    device: object | None = None,
    cuda_graph: bool = False,
) -> Timing:
    """Time `fn()`; on CUDA with events around each call, flushing L2 before each repetition.

    cuda_graph: capture fn once in a CUDA graph (after the warm-up) and time its replays, as a
    serving engine runs a decode step: the host's launch work (Python, argument checks, the
    Triton launcher) is out of the timing, only the GPU's time is in. For calls of tens of
    microseconds, where launching costs more than the kernel; the audit call stays eager. Ignored
    on CPU."""
    if warmup < 0 or reps < 1:
        raise ValueError(f"measure: warmup={warmup} must be >= 0 and reps={reps} >= 1")
    acct = accounting.current()  # set where the submission runs: the worker (or an in-process judge)
    if acct is None and not in_the_worker():
        return _measure_in_judge(fn, warmup, reps, flush_l2, device, cuda_graph)
    if acct is None or not acct.recording:  # no rules, or the test's oracle is being timed
        return timer.timed(fn, warmup, reps, flush_l2, device, cuda_graph)
    with acct.paused():
        timing = timer.timed(fn, warmup, reps, flush_l2, device, cuda_graph)
    acct.audit(fn, cuda=timer.cuda_device(device) is not None)
    if hits := acct.forbidden_hits():  # no credit can follow: stop the test now, not after its sweep
        raise RuntimeError("perf audit: " + "; ".join(hits))
    return timing


def _measure_in_judge(fn: Callable[[], object], warmup: int, reps: int, flush_l2: bool, device: object | None,
                      cuda_graph: bool) -> Timing:
    from autograder.judge import bracket, plugin
    from autograder.judge.proxies import BoundMethod, Remote

    if isinstance(fn, (Remote, BoundMethod)):
        return bracket.measure_remote(fn, warmup=warmup, reps=reps, flush_l2=flush_l2, device=device,
                                      cuda_graph=cuda_graph)
    client = plugin.client_if_started()
    before = client.calls if client is not None else 0
    timing = timer.timed(fn, warmup, reps, flush_l2, device, cuda_graph)
    if client is not None and client.calls != before:
        raise TypeError("measure: this function calls the submission through the judge (each call a request); "
                        "time a worker callable instead, e.g. what an in_worker helper returns")
    return timing


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
