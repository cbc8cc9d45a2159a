"""Where each expert lives: a placement of E logical experts on the physical expert slots of
`world` EP ranks, S slots a rank (physical slot p = rank * S + j is rank p // S's j-th slot).

Without redundancy S = E / world and rank r hosts experts r*S .. r*S+S-1 (contiguous). With
redundant experts (the EPLB idea, DeepSeek-V3 §3.4) world * S > E: the busiest experts get
replicas, their tokens split over the replicas, and replicas are packed so the ranks' loads even out.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class ExpertPlacement:
    """slots[r] = the logical experts rank r hosts, in its local slot order (the order its expert
    weights are stacked in). Every rank has the same number of slots; every expert has >= 1 slot."""

    num_experts: int
    slots: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if not self.slots or len({len(s) for s in self.slots}) != 1 or not self.slots[0]:
            raise ValueError(f"placement: every rank needs the same number (>= 1) of slots, got "
                             f"{[len(s) for s in self.slots]}")
        hosted = {e for s in self.slots for e in s}
        if any(not 0 <= e < self.num_experts for e in hosted):
            raise ValueError(f"placement: expert ids must lie in 0..{self.num_experts - 1}")
        missing = sorted(set(range(self.num_experts)) - hosted)
        if missing:
            raise ValueError(f"placement: experts {missing[:8]} have no slot")

    @property
    def world(self) -> int:
        return len(self.slots)

    @property
    def slots_per_rank(self) -> int:
        return len(self.slots[0])

    def replicas(self, expert: int) -> list[int]:
        """The physical slots holding `expert`, in increasing order."""
        s = self.slots_per_rank
        return [r * s + j for r, row in enumerate(self.slots) for j, e in enumerate(row) if e == expert]


def contiguous_placement(num_experts: int, world: int) -> ExpertPlacement:
    """No redundancy: rank r hosts experts r*E/world .. (r+1)*E/world - 1."""
    if world < 1 or num_experts % world:
        raise ValueError(f"{num_experts} experts do not split evenly over {world} ranks")
    per = num_experts // world
    return ExpertPlacement(num_experts, tuple(tuple(range(r * per, (r + 1) * per)) for r in range(world)))


def assign_replicas(experts: Tensor, placement: ExpertPlacement) -> Tensor:
    """experts (T, k) logical ids -> physical slots (T, k): token t's choice e goes to replica
    t mod n_e of e's n_e replicas (in increasing slot order), so an expert's tokens spread evenly."""
    raise NotImplementedError("p4.12: assign_replicas")


def rank_loads(placement: ExpertPlacement, load: Tensor) -> list[float]:
    """The tokens each rank computes when expert e's load[e] tokens split evenly over its replicas."""
    raise NotImplementedError("p4.13: rank_loads")


def eplb_placement(load: Tensor, world: int, slots_per_rank: int) -> ExpertPlacement:
    """Redundant experts placed by load. load (E,): tokens routed to each expert on a recorded trace.
    1. The world * slots_per_rank - E spare slots go one at a time to the expert with the largest
       load per replica (load[e] / n_e; ties: the lower id), never more than `world` replicas.
    2. Replicas, heaviest share first (ties: the lower expert id), go to the rank with the least
       load so far among those with a free slot, preferring ranks that do not host that expert yet
       (ties: the lower rank). Each rank's slots are then sorted by expert id."""
    num_experts = load.shape[0]
    spare = world * slots_per_rank - num_experts
    if spare < 0:
        raise ValueError(f"{world} ranks x {slots_per_rank} slots cannot hold {num_experts} experts")
    raise NotImplementedError("p4.14: eplb_placement")


def imbalance(loads: list[float]) -> float:
    """max / mean of the ranks' loads (1.0: perfectly even)."""
    mean = sum(loads) / len(loads)
    return max(loads) / mean if mean else 1.0
