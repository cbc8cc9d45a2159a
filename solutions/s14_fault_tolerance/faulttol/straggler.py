"""Straggler detection from per-rank step times.

In synchronous data parallelism every step waits for the slowest rank, so one slow GPU (thermal
throttling, a bad link, a noisy neighbour) slows the whole job. Each rank times its own steps
(before the collective that would hide the difference: the compute part), the times are gathered,
and a rank whose typical step is far above the group's typical step is named. Medians, not means:
one long step (a checkpoint, a garbage collection) must not name a healthy rank.
"""

from __future__ import annotations

import statistics

import torch
import torch.distributed as dist


def find_stragglers(times: list[list[float]], factor: float = 1.5) -> list[int]:
    """times[s][r]: seconds rank r spent on step s (every row one entry per rank). A rank is a
    straggler when the median of its own times exceeds `factor` times the median over ranks of
    those per-rank medians. Returns the stragglers' ranks, ascending."""
    if not times or any(len(row) != len(times[0]) for row in times) or not times[0]:
        raise ValueError("find_stragglers: need at least one step and the same number of ranks in every step")
    if factor <= 1:
        raise ValueError(f"find_stragglers: factor must be > 1, got {factor}")
    # BEGIN SOLUTION
    per_rank = [statistics.median(row[r] for row in times) for r in range(len(times[0]))]
    typical = statistics.median(per_rank)
    return [r for r, t in enumerate(per_rank) if t > factor * typical]
    # END SOLUTION


def gather_step_times(seconds: float, group: dist.ProcessGroup | None = None) -> list[float]:
    """Every rank's `seconds` (one step's time), indexed by rank in `group`. Every rank must call it."""
    # BEGIN SOLUTION
    world = dist.get_world_size(group)
    mine = torch.tensor([seconds], dtype=torch.float64)
    out = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(out, mine, group=group)
    return [float(t.item()) for t in out]
    # END SOLUTION
