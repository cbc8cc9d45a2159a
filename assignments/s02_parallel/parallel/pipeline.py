"""Pipeline parallelism: schedules as per-stage action lists, a validator, a timing simulator, and
an executor that runs one stage's actions over torch.distributed point-to-point calls.

A schedule for p stages and m micro-batches is a list of p lists; schedule[s] is what stage s
does, in order: Action("F", i) runs micro-batch i forward, Action("B", i) backward. Stage s's
forward of i needs stage s-1's forward of i (its input activation); its backward of i needs stage
s+1's backward of i (the gradient of its output); the last stage's backward follows its own forward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn


@dataclass(frozen=True)
class Action:
    """One step of one stage: kind "F" (forward) or "B" (backward) of micro-batch `microbatch`."""

    kind: str
    microbatch: int

    def __post_init__(self) -> None:
        if self.kind not in ("F", "B"):
            raise ValueError(f"Action.kind must be 'F' or 'B', got {self.kind!r}")
        if isinstance(self.microbatch, bool) or not isinstance(self.microbatch, int) or self.microbatch < 0:
            raise ValueError(f"Action.microbatch must be an int >= 0, got {self.microbatch!r}")


@dataclass(frozen=True)
class Timeline:
    """A schedule played in simulated time: start[s][k] is when stage s starts its k-th action.
    busy[s] is the time stage s computes; bubble_fraction = 1 - sum(busy) / (p * makespan)."""

    start: list[list[float]]
    makespan: float
    busy: list[float]
    bubble_fraction: float


def _check_sizes(num_stages: int, num_microbatches: int) -> None:
    for name, value in (("num_stages", num_stages), ("num_microbatches", num_microbatches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def afab_schedule(num_stages: int, num_microbatches: int) -> list[list[Action]]:
    """GPipe's all-forward-all-backward: every stage runs F0..F(m-1), then B0..B(m-1)."""
    _check_sizes(num_stages, num_microbatches)
    raise NotImplementedError("s02.7: afab_schedule")


def one_f_one_b_schedule(num_stages: int, num_microbatches: int) -> list[list[Action]]:
    """1F1B (PipeDream-Flush, Megatron's non-interleaved schedule). Stage s runs
    w = min(p - s - 1, m) warm-up forwards, then alternates one forward and one backward
    (F(w), B0, F(w+1), B1, ...) until its forwards are done, then the remaining backwards, all in
    micro-batch order. Stage s never holds more than p - s micro-batches' activations."""
    _check_sizes(num_stages, num_microbatches)
    raise NotImplementedError("s02.8: one_f_one_b_schedule")


def simulate_schedule(schedule: Sequence[Sequence[Action]], *, forward_time: float = 1.0,
                      backward_time: float = 2.0) -> Timeline:
    """Play `schedule` with every forward taking forward_time and every backward backward_time on
    every stage (communication free): each action starts as soon as its stage is free and its
    dependency (previous stage's F, next stage's B) has finished. ValueError when the schedule
    cannot finish (an action waits for one that never runs or that waits for it: a deadlock)."""
    raise NotImplementedError("s02.9: simulate_schedule")


def validate_schedule(schedule: Sequence[Sequence[Action]], num_microbatches: int, *,
                      max_in_flight: int | None = None) -> None:
    """Raise ValueError (saying which stage and action) unless: every stage runs the forward and
    the backward of every micro-batch 0..m-1 exactly once, each backward after its own forward;
    the stages can run their lists without deadlock (a forward waits for the previous stage's
    forward, a backward for the next stage's backward); and, when max_in_flight is given, no stage
    ever holds more than max_in_flight micro-batches (forwarded, not yet backwarded)."""
    raise NotImplementedError("s02.10: validate_schedule")


def bubble_fraction(num_stages: int, num_microbatches: int) -> float:
    """Idle share of p stages over one AFAB or 1F1B step of m equal micro-batches:
    (p - 1) / (m + p - 1)."""
    _check_sizes(num_stages, num_microbatches)
    raise NotImplementedError("s02.11: bubble_fraction")


def run_schedule(module: nn.Module, actions: Sequence[Action], *, stage: int, num_stages: int,
                 inputs: Sequence[Tensor] | None, targets: Sequence[Tensor] | None,
                 loss_fn: Callable[[Tensor, Tensor], Tensor], activation_shape: Sequence[int],
                 stage_ranks: Sequence[int] | None = None) -> list[float]:
    """Run this stage's `actions` (schedule[stage]) on `module`, the stage's layers.

    The first stage reads micro-batch i from inputs[i]; the others receive it (fp32, shape
    activation_shape) from stage_ranks[stage - 1] (default: global rank stage - 1) and send their
    output to the next stage; gradients flow back the same way. The last stage computes
    loss_fn(output, targets[i]) and backpropagates loss / m (m: the number of forwards in
    `actions`), so the parameters' .grad accumulate the gradient of the mean loss over the m
    micro-batches. Returns the m unscaled losses in micro-batch order on the last stage, []
    elsewhere. Sends never block the stage (isend, waited for at the end); a message carries
    tag = micro-batch."""
    raise NotImplementedError("s02.12: run_schedule")
