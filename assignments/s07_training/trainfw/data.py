"""The training loop's own state: which step comes next and the RNG that draws each global batch.

Every rank draws the same global batch of indices (same generator, same state) and takes its own
contiguous slice of it, so the data a step sees depends only on the step and the generator's state,
not on the world size: a run resumed from a checkpoint on any world size sees the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class LoopState:
    """step: steps done so far; generator: draws the batches (its state is the data position)."""

    seed: int
    step: int = 0
    generator: torch.Generator = field(default_factory=torch.Generator)

    def __post_init__(self) -> None:
        if self.step < 0:
            raise ValueError(f"LoopState.step must be >= 0, got {self.step}")

    @classmethod
    def start(cls, seed: int) -> LoopState:
        g = torch.Generator()
        g.manual_seed(seed)
        return cls(seed=seed, step=0, generator=g)

    def state_dict(self) -> dict:
        """Everything needed to resume the loop exactly."""
        raise NotImplementedError("s07.4: LoopState.state_dict")

    @classmethod
    def from_state_dict(cls, saved: dict) -> LoopState:
        """The loop state `state_dict` saved, with its generator where it was."""
        raise NotImplementedError("s07.5: LoopState.from_state_dict")


def next_batch(loop: LoopState, x: Tensor, y: Tensor, global_batch: int, rank: int,
               world: int) -> tuple[Tensor, Tensor]:
    """Draw the next global batch (global_batch indices into x, with replacement) and return this
    rank's contiguous slice of it: (global_batch // world, ...) of x and of y. Advances the loop."""
    if global_batch % world != 0:
        raise ValueError(f"next_batch: a global batch of {global_batch} does not split over {world} ranks")
    raise NotImplementedError("s07.6: next_batch")
