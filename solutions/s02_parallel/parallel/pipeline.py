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
    # BEGIN SOLUTION
    m = num_microbatches
    return [[Action("F", i) for i in range(m)] + [Action("B", i) for i in range(m)] for _ in range(num_stages)]
    # END SOLUTION


def one_f_one_b_schedule(num_stages: int, num_microbatches: int) -> list[list[Action]]:
    """1F1B (PipeDream-Flush, Megatron's non-interleaved schedule). Stage s runs
    w = min(p - s - 1, m) warm-up forwards, then alternates one forward and one backward
    (F(w), B0, F(w+1), B1, ...) until its forwards are done, then the remaining backwards, all in
    micro-batch order. Stage s never holds more than p - s micro-batches' activations."""
    _check_sizes(num_stages, num_microbatches)
    # BEGIN SOLUTION
    p, m = num_stages, num_microbatches
    schedule = []
    for s in range(p):
        warmup = min(p - s - 1, m)
        actions = [Action("F", i) for i in range(warmup)]
        for i in range(m - warmup):
            actions += [Action("F", warmup + i), Action("B", i)]
        actions += [Action("B", i) for i in range(m - warmup, m)]
        schedule.append(actions)
    return schedule
    # END SOLUTION


def simulate_schedule(schedule: Sequence[Sequence[Action]], *, forward_time: float = 1.0,
                      backward_time: float = 2.0) -> Timeline:
    """Play `schedule` with every forward taking forward_time and every backward backward_time on
    every stage (communication free): each action starts as soon as its stage is free and its
    dependency (previous stage's F, next stage's B) has finished. ValueError when the schedule
    cannot finish (an action waits for one that never runs or that waits for it: a deadlock)."""
    # BEGIN SOLUTION
    if forward_time <= 0 or backward_time <= 0:
        raise ValueError("forward_time and backward_time must be positive")
    p = len(schedule)
    if p == 0:
        raise ValueError("a schedule needs at least one stage")
    done: dict[tuple[int, str, int], float] = {}  # (stage, kind, microbatch) -> finish time
    start: list[list[float]] = [[] for _ in range(p)]
    free = [0.0] * p
    nxt = [0] * p
    progress = True
    while progress:
        progress = False
        for s in range(p):
            while nxt[s] < len(schedule[s]):
                a = schedule[s][nxt[s]]
                if a.kind == "F":
                    dep = (s - 1, "F", a.microbatch) if s > 0 else None
                else:
                    dep = (s + 1, "B", a.microbatch) if s < p - 1 else (s, "F", a.microbatch)
                if dep is not None and dep not in done:
                    break
                begin = max(free[s], done[dep] if dep is not None else 0.0)
                free[s] = begin + (forward_time if a.kind == "F" else backward_time)
                done[(s, a.kind, a.microbatch)] = free[s]
                start[s].append(begin)
                nxt[s] += 1
                progress = True
    stuck = [s for s in range(p) if nxt[s] < len(schedule[s])]
    if stuck:
        waits = ", ".join(f"stage {s} at {schedule[s][nxt[s]]}" for s in stuck)
        raise ValueError(f"the schedule cannot finish: {waits} wait for actions that never run first")
    makespan = max(free)
    busy = [sum(forward_time if a.kind == "F" else backward_time for a in actions) for actions in schedule]
    return Timeline(start, makespan, busy, 1.0 - sum(busy) / (p * makespan))
    # END SOLUTION


def validate_schedule(schedule: Sequence[Sequence[Action]], num_microbatches: int, *,
                      max_in_flight: int | None = None) -> None:
    """Raise ValueError (saying which stage and action) unless: every stage runs the forward and
    the backward of every micro-batch 0..m-1 exactly once, each backward after its own forward;
    the stages can run their lists without deadlock (a forward waits for the previous stage's
    forward, a backward for the next stage's backward); and, when max_in_flight is given, no stage
    ever holds more than max_in_flight micro-batches (forwarded, not yet backwarded)."""
    # BEGIN SOLUTION
    _check_sizes(1, num_microbatches)
    if len(schedule) == 0:
        raise ValueError("a schedule needs at least one stage")
    want = {(k, i) for k in "FB" for i in range(num_microbatches)}
    for s, actions in enumerate(schedule):
        seen: set[tuple[str, int]] = set()
        in_flight = 0
        for a in actions:
            key = (a.kind, a.microbatch)
            if key not in want:
                raise ValueError(f"stage {s}: {a} is not a micro-batch of 0..{num_microbatches - 1}")
            if key in seen:
                raise ValueError(f"stage {s}: {a} runs twice")
            if a.kind == "B" and ("F", a.microbatch) not in seen:
                raise ValueError(f"stage {s}: {a} runs before its forward")
            seen.add(key)
            in_flight += 1 if a.kind == "F" else -1
            if max_in_flight is not None and in_flight > max_in_flight:
                raise ValueError(f"stage {s}: {in_flight} micro-batches in flight at {a}, more than {max_in_flight}")
        if seen != want:
            missing = sorted(want - seen)
            raise ValueError(f"stage {s}: never runs {missing[:4]}")
    simulate_schedule(schedule)  # raises when the stages wait on each other forever
    # END SOLUTION


def bubble_fraction(num_stages: int, num_microbatches: int) -> float:
    """Idle share of p stages over one AFAB or 1F1B step of m equal micro-batches:
    (p - 1) / (m + p - 1)."""
    _check_sizes(num_stages, num_microbatches)
    # BEGIN SOLUTION
    return (num_stages - 1) / (num_microbatches + num_stages - 1)
    # END SOLUTION


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
    # BEGIN SOLUTION
    ranks = list(stage_ranks) if stage_ranks is not None else list(range(num_stages))
    first, last = stage == 0, stage == num_stages - 1
    m = sum(a.kind == "F" for a in actions)
    saved: dict[int, tuple[Tensor | None, Tensor]] = {}  # microbatch -> (stage input, output or loss)
    losses: dict[int, float] = {}
    pending = []
    for a in actions:
        i = a.microbatch
        if a.kind == "F":
            if first:
                x = inputs[i]
            else:
                x = torch.empty(tuple(activation_shape), dtype=torch.float32)
                dist.recv(x, src=ranks[stage - 1], tag=i)
                x.requires_grad_()
            out = module(x)
            if last:
                loss = loss_fn(out, targets[i])
                losses[i] = loss.item()
                saved[i] = (x, loss / m)
            else:
                pending.append(dist.isend(out.detach().contiguous(), dst=ranks[stage + 1], tag=i))
                saved[i] = (x, out)
        else:
            x, out = saved.pop(i)
            if last:
                out.backward()
            else:
                grad = torch.empty_like(out)
                dist.recv(grad, src=ranks[stage + 1], tag=i)
                out.backward(grad)
            if not first:
                pending.append(dist.isend(x.grad.contiguous(), dst=ranks[stage - 1], tag=i))
    for request in pending:
        request.wait()
    return [losses[i] for i in sorted(losses)]
    # END SOLUTION
