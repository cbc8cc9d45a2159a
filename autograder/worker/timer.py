"""The timing loops of the course timer: warm-up, L2 flush, CUDA events, many reps.

Pure code with no grading state: the worker runs them around the student's calls (the judge
brackets that phase with its own clock), and the judge runs them around its own baselines.

Input sets and the kept outputs of the repetitions live in `feed`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autograder.worker.feed import Feed, copy_of

# Larger than the L2 of any current GPU (H100/H200: 50 MB), so one write evicts it.
L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Timing:
    """Seconds per call over `reps` timed repetitions (after warm-up). `output` is what the audited
    call returned when the submission was timed in the worker (re-checked by the test); `outputs`,
    with input sets, (repetition, output) pairs of the timed repetitions that were checked."""

    median_s: float
    mean_s: float
    stdev_s: float
    min_s: float
    p10_s: float
    p90_s: float
    reps: int
    output: Any = None
    replayed: Any = None  # cuda_graph: what the graph's last timed replay left in its output tensors
    outputs: tuple = ()

    @property
    def graded_s(self) -> float:
        """The seconds per call perf tests grade: the mean, sum / reps, which is the statistic the
        judge's clock vouches for when the worker timed the call (autograder/judge/bracket.py)."""
        return self.mean_s

    @classmethod
    def from_samples(cls, samples: list[float], output: Any = None, replayed: Any = None,
                     outputs: tuple = ()) -> Timing:
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
            outputs=tuple(outputs),
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


def samples(fn: Callable[[], object], reps: int, flush_l2: bool, device: object | None,
            feed: Feed | None = None) -> list[float]:
    """Seconds of each of `reps` calls (no warm-up): CUDA events on a GPU, perf_counter on CPU.
    With a feed, each repetition's inputs are loaded before it and its output kept after it, both
    outside the timed span."""
    cuda = cuda_device(device)
    if cuda is None:
        out = []
        for i in range(reps):
            if feed is not None:
                feed.load(i, reps)
            start = time.perf_counter()
            result = fn()
            out.append(time.perf_counter() - start)
            if feed is not None:
                feed.keep_output(i, result)
        return out
    import torch

    scratch = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=cuda) if flush_l2 else None
    torch.cuda.synchronize(cuda)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if feed is not None:
            feed.load(i, reps)
        if scratch is not None:
            scratch.zero_()  # evict the previous repetition's data (and the copied-in inputs) from L2
        starts[i].record()
        result = fn()
        ends[i].record()
        if feed is not None:
            feed.keep_output(i, result)
    torch.cuda.synchronize(cuda)
    return [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends, strict=True)]


class Replay:
    """A call captured in a CUDA graph: calling it replays the graph; `output` is what the call
    returned during the capture, the graph's own tensors that every replay writes again."""

    def __init__(self, graph: Any, output: Any) -> None:
        self.graph, self.output = graph, output

    def __call__(self) -> Any:
        self.graph.replay()
        return self.output


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


def timed(fn: Callable[..., object], warmup: int, reps: int, flush_l2: bool, device: object | None,
          cuda_graph: bool = False, sets: list[tuple] | None = None, keep: frozenset[int] | None = None) -> Timing:
    """Warm up on the first set, then time `reps` calls over `sets` (or `fn()` without), keeping
    the outputs of the repetitions in `keep` (`Timing.outputs`)."""
    feed = Feed.of(sets[0]) if sets else None
    if feed is not None:
        feed.rotate(sets, keep)
        fn = feed.bind(fn)
    for _ in range(warmup):
        fn()
    synchronize(device)
    call = capture(fn, device) if cuda_graph else fn
    times = samples(call, reps, flush_l2, device, feed)
    synchronize(device)
    kept = tuple(sorted(feed.kept.items())) if feed is not None else ()
    return Timing.from_samples(times, replayed=replayed_output(call, device), outputs=kept)
