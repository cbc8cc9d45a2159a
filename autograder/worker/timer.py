"""The timing loops of the course timer: warm-up, L2 flush, CUDA events, median of many reps.

Pure code with no grading state: the worker runs them around the student's calls (the judge
brackets that phase with its own clock), and the judge runs them around its own baselines.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Larger than the L2 of any current GPU (H100/H200: 50 MB), so one write evicts it.
L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Timing:
    """Seconds per call over `reps` timed repetitions (after warm-up). `output` is what the last
    call returned when the submission was timed in the worker (re-checked by the test)."""

    median_s: float
    mean_s: float
    stdev_s: float
    min_s: float
    p10_s: float
    p90_s: float
    reps: int
    output: Any = None
    replayed: Any = None  # cuda_graph: what the graph's last timed replay left in its output tensors

    @classmethod
    def from_samples(cls, samples: list[float], output: Any = None, replayed: Any = None) -> Timing:
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
            output=output,
            replayed=replayed,
        )


def cuda_device(device: object | None) -> object | None:
    import torch

    if device is not None:
        dev = torch.device(device)
        return dev if dev.type == "cuda" else None
    return torch.device("cuda") if torch.cuda.is_available() else None


def synchronize(device: object | None) -> None:
    cuda = cuda_device(device)
    if cuda is not None:
        import torch

        torch.cuda.synchronize(cuda)


def samples(fn: Callable[[], object], reps: int, flush_l2: bool, device: object | None) -> list[float]:
    """Seconds of each of `reps` calls (no warm-up): CUDA events on a GPU, perf_counter on CPU."""
    cuda = cuda_device(device)
    if cuda is None:
        out = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
        return out
    import torch

    scratch = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=cuda) if flush_l2 else None
    torch.cuda.synchronize(cuda)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if scratch is not None:
            scratch.zero_()  # evict the previous repetition's data from L2
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize(cuda)
    return [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends, strict=True)]


class Replay:
    """A call captured in a CUDA graph: calling it replays the graph; `output` is what the call
    returned during the capture, the graph's own tensors that every replay writes again."""

    def __init__(self, graph: Any, output: Any) -> None:
        self.graph, self.output = graph, output

    def __call__(self) -> None:
        self.graph.replay()


def copy_of(value: Any) -> Any:
    """Plain tensors (also inside tuples and lists) cloned; anything else is None. Only exact
    torch.Tensor: an object of the submission's own with a `clone` method would run its code here,
    where nothing is accounted, and could hand back an answer the replays never wrote."""
    import torch

    if type(value) in (tuple, list):
        return type(value)(copy_of(v) for v in value)
    return torch.Tensor.clone(value) if type(value) is torch.Tensor else None


def capture(fn: Callable[[], object], device: object | None) -> Callable[[], object]:
    """fn captured in a CUDA graph: the returned `Replay` replays it (one launch, no host work in
    it), as serving engines run decode steps. On CPU, fn itself: there are no graphs to capture.

    The first call runs on a side stream, as torch asks before a capture; a call that cannot be
    captured (a host sync, a CPU tensor, a shape read off the device) raises RuntimeError."""
    cuda = cuda_device(device)
    if cuda is None:
        return fn
    import torch

    side = torch.cuda.Stream(cuda)
    side.wait_stream(torch.cuda.current_stream(cuda))
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream(cuda).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            output = fn()
    except Exception as e:  # noqa: BLE001  any failure to capture is the call's
        raise RuntimeError(f"measure(cuda_graph=True): the call cannot be captured in a CUDA graph "
                           f"({type(e).__name__}: {e}); no host syncs, .item() or CPU tensors inside it") from None
    torch.cuda.synchronize(cuda)
    return Replay(graph, output)


def replayed_output(call: Callable[[], object], device: object | None) -> Any:
    """A copy of what the graph's last replay wrote (None when `call` is not a `Replay`): a capture
    that recorded less work than the call does shows here, while the eager audit call looks right."""
    if not isinstance(call, Replay):
        return None
    synchronize(device)
    return copy_of(call.output)


def timed(fn: Callable[[], object], warmup: int, reps: int, flush_l2: bool, device: object | None,
          cuda_graph: bool = False) -> Timing:
    for _ in range(warmup):
        fn()
    synchronize(device)
    call = capture(fn, device) if cuda_graph else fn
    return Timing.from_samples(samples(call, reps, flush_l2, device), replayed=replayed_output(call, device))
