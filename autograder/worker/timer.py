"""The timing loops of the course timer: warm-up, L2 flush, CUDA events, many reps.

Pure code with no grading state: the worker runs them around the student's calls (the judge
brackets that phase with its own clock), and the judge runs them around its own baselines.

With input sets (a `Feed`), the call reads static input buffers it was bound to once; before
each repetition the loop copies that repetition's set into them, and after it keeps a copy of
its output, both outside the timed span. A submission is timed on as many distinct sets as
repetitions, so no repetition sees inputs another timed repetition saw: a cache keyed on the
inputs' identity answers with a stale result, and one keyed on their content never hits. Which
kept outputs are checked is chosen after the loop (`pick_checked`), so every one must be right.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Larger than the L2 of any current GPU (H100/H200: 50 MB), so one write evicts it.
L2_FLUSH_BYTES = 256 * 1024 * 1024
# Timed repetitions whose kept outputs are checked, drawn after the loop: a submission that
# answers wrong on a fraction f of the repetitions passes with probability about (1 - f)^4.
CHECKED_REPS = 4


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


def copy_of(value: Any) -> Any:
    """Plain tensors (also inside tuples and lists) cloned; anything else is None. Only exact
    torch.Tensor: an object of the submission's own with a `clone` method would run its code here,
    where nothing is accounted, and could hand back an answer the replays never wrote."""
    import torch

    if type(value) in (tuple, list):
        return type(value)(copy_of(v) for v in value)
    if type(value) in (int, float, bool, str, type(None)):  # immutable builtins: the value itself
        return value
    return torch.Tensor.clone(value) if type(value) is torch.Tensor else None


@dataclass
class Feed:
    """Input sets: `static` are the arguments the timed call is bound to (tensors the loop owns,
    read by a captured graph too), `sets` the source sets copied into them: repetition i runs on
    set i * K // reps (a submission has K = reps: each repetition its own set, copied in before
    it; the judge's own baselines may run several repetitions on one set). `kept[i]` is a copy of
    what repetition i returned, for every i in `keep` (None: every repetition); with hold=False
    each copy is made and dropped (the judge's estimate of their cost on a GPU)."""

    static: tuple
    sets: list[tuple] = field(default_factory=list)
    kept: dict[int, Any] = field(default_factory=dict)
    keep: frozenset[int] | None = None
    hold: bool = True

    @classmethod
    def of(cls, first: tuple) -> Feed:
        """Static buffers shaped as the set `first` and holding its values (plain tensors only)."""
        return cls(tuple(_static_copy(v) for v in first))

    def bind(self, fn: Callable[..., object]) -> Callable[[], object]:
        return lambda: fn(*self.static)

    def rotate(self, sets: list[tuple], keep: frozenset[int] | None = None) -> None:
        """The source sets of the next timing loop and the repetitions whose outputs it keeps:
        ValueError unless each set matches the static buffers (tensors of the same shape, dtype
        and device; other arguments equal)."""
        check_sets([self.static, *sets])
        self.sets, self.kept, self.keep = list(sets), {}, keep

    def load(self, i: int, reps: int) -> None:
        """Before repetition i: copy its set into the static buffers if it starts a new run."""
        import torch

        k = set_of(i, reps, len(self.sets))
        if not self.sets or (i > 0 and set_of(i - 1, reps, len(self.sets)) == k):
            return
        with torch.no_grad():  # a copy into a leaf that requires grad is no autograd op
            for dst, src in zip(self.static, self.sets[k], strict=True):
                if type(dst) is torch.Tensor:
                    dst.copy_(src)

    def keep_output(self, i: int, result: Any) -> None:
        """After repetition i: a copy of its output, if it is one to keep."""
        if self.sets and (self.keep is None or i in self.keep):
            copied = copy_of(result)
            if self.hold:
                self.kept[i] = copied

    def take(self, reps: list[int]) -> list[Any]:
        """The kept outputs of `reps` (KeyError for one not kept); all kept copies are dropped."""
        try:
            return [self.kept[i] for i in reps]
        finally:
            self.kept = {}


def pick_checked(reps: int, count: int = CHECKED_REPS) -> list[int]:
    """The timed repetitions whose outputs are checked: `count` of them drawn from the system's
    entropy (nothing the submission's process can predict or seed), all of them when reps <= count.
    Tests replace this function to pick deterministically."""
    if reps <= count:
        return list(range(reps))
    return sorted(random.SystemRandom().sample(range(reps), count))


def set_of(i: int, reps: int, k: int) -> int:
    """The input set of repetition i of reps over k sets (consecutive runs, as even as they divide)."""
    return i * k // reps if k else 0


def _static_copy(value: Any) -> Any:
    import torch

    if type(value) is torch.Tensor:
        return value.detach().clone().requires_grad_(value.requires_grad)
    return value


def check_sets(sets: list[tuple]) -> None:
    """ValueError unless every set has the same arguments: tensors alike in shape, dtype, device
    and requires_grad at each position, any other argument equal (and of an immutable builtin type)."""
    import torch

    first = sets[0]
    for k, one in enumerate(sets):
        if type(one) not in (tuple, list) or len(one) != len(first):
            raise ValueError(f"measure: input set {k} is not a tuple of {len(first)} arguments")
        for pos, (a, b) in enumerate(zip(first, one, strict=True)):
            if type(a) is torch.Tensor and type(b) is torch.Tensor:
                if (a.shape, a.dtype, a.device, a.requires_grad) != (b.shape, b.dtype, b.device, b.requires_grad):
                    raise ValueError(f"measure: argument {pos} of input set {k} is a tensor of another shape, "
                                     f"dtype, device or requires_grad than in set 0")
            elif type(a) is torch.Tensor or type(b) is torch.Tensor or type(b) not in (int, float, bool, str) \
                    or type(a) is not type(b) or a != b:
                raise ValueError(f"measure: argument {pos} of input set {k} must be a tensor as in set 0, or "
                                 f"an int, float, bool or str equal to set 0's")


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
