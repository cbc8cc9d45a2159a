"""Joining GPU work to the host calls that enqueued it, and those calls to the operators around them.

Every GPU event carries the correlation id of the host call that enqueued it. That call may be a
CUDA *runtime* call (cudaLaunchKernel, cudaMemcpyAsync, cudaGraphLaunch, ...) or a *driver* call:
cuBLAS's Hopper kernels and Triton's kernels are launched with cuLaunchKernelEx, category
"cuda_driver". A join over runtime calls alone silently loses them. A kernel replayed from a CUDA
graph correlates with the one cudaGraphLaunch that replayed the whole graph, not with the operator
that launched it at capture time.
"""

from __future__ import annotations

from dataclasses import dataclass

from .events import Event, gpu_events

HOST_CALL_CATEGORIES = ("cuda_runtime", "cuda_driver")
OP_CATEGORIES = ("cpu_op", "user_annotation")


@dataclass(frozen=True)
class Launch:
    """One GPU event and the host call that enqueued it (None when the trace has none).
    delay_us: from the call's end to the GPU event's start, clipped at 0."""

    gpu: Event
    call: Event | None
    delay_us: float | None


def join_launches(events: list[Event]) -> list[Launch]:
    """One Launch per GPU event, in trace order, joined on the correlation id with the runtime or
    driver call of the same id."""
    # BEGIN SOLUTION
    calls = {e.correlation: e for e in events if e.cat in HOST_CALL_CATEGORIES and e.correlation is not None}
    out = []
    for g in gpu_events(events):
        call = calls.get(g.correlation)
        out.append(Launch(g, call, None if call is None else max(0.0, g.ts - call.end)))
    return out
    # END SOLUTION


def enclosing_op(events: list[Event], call: Event) -> Event | None:
    """The innermost operator range ("cpu_op" or "user_annotation") on the call's process and thread
    that contains the call ([ts, end] within the range's, ends included); None when there is none.
    Innermost: the shortest such range (on a tie, the one that starts last)."""
    # BEGIN SOLUTION
    around = [e for e in events if e.cat in OP_CATEGORIES and e.pid == call.pid and e.tid == call.tid
              and e.ts <= call.ts and call.end <= e.end]
    return min(around, key=lambda e: (e.dur, -e.ts), default=None)
    # END SOLUTION


def time_by_op(events: list[Event]) -> dict[str, float]:
    """GPU microseconds per operator name: each GPU event's duration goes to the name of its call's
    enclosing_op; to "<cudaGraphLaunch>" (the call's name in angle brackets) when the call has no
    enclosing operator; to "<unknown>" when the GPU event has no call."""
    # BEGIN SOLUTION
    out: dict[str, float] = {}
    for launch in join_launches(events):
        if launch.call is None:
            key = "<unknown>"
        else:
            op = enclosing_op(events, launch.call)
            key = op.name if op is not None else f"<{launch.call.name}>"
        out[key] = out.get(key, 0.0) + launch.gpu.dur
    return out
    # END SOLUTION
