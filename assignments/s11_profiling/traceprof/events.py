"""Reading a torch.profiler trace (Chrome/Kineto JSON): the complete events, typed.

A trace is {"traceEvents": [...], ...}. A *complete* event has "ph": "X", a start "ts" and a
duration "dur", both in microseconds (floats: Kineto keeps nanoseconds as fractions), a category
"cat" and "args". The categories this assignment uses:
- "cpu_op": an aten operator or a record_function range on a host thread ("Input Dims" and
  "Input type" in args when the profile recorded shapes); "user_annotation" likewise;
- "cuda_runtime" / "cuda_driver": a CUDA API call on the host (cudaLaunchKernel,
  cuLaunchKernelEx, cudaGraphLaunch, cudaMemcpyAsync, ...), args["correlation"] names the work it
  enqueued;
- "kernel", "gpu_memcpy", "gpu_memset": work on the GPU, with args["stream"], args["device"] and the
  args["correlation"] of the host call that enqueued it.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass(frozen=True)
class Event:
    """One complete ("X") event. ts and dur in microseconds; tid as the trace writes it (int or str)."""

    name: str
    cat: str
    ts: float
    dur: float
    pid: int | str
    tid: int | str
    args: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def correlation(self) -> int | None:
        return self.args.get("correlation")


def load_trace(path: str | Path) -> list[Event]:
    """The complete events of a trace file (.json or .json.gz), sorted by (ts, -dur).

    Keeps events with "ph" == "X" and both "ts" and "dur"; drops instant, metadata and flow events.
    The sort puts an enclosing range before the ranges it contains when they start together.
    Raises ValueError naming the file when it is not a trace (no "traceEvents" list).
    """
    raise NotImplementedError("s11.3: load_trace")


def gpu_events(events: list[Event]) -> list[Event]:
    """The work that ran on a GPU (categories GPU_CATEGORIES), in trace order."""
    raise NotImplementedError("s11.4: gpu_events")
