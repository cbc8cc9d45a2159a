"""A data loader whose position is part of the checkpoint.

Each epoch visits the dataset in a fresh permutation drawn from a generator seeded with
seed + epoch, in batches of `batch` indices; the last, incomplete batch of an epoch is dropped
(drop_last). The position is then two integers, (epoch, cursor): the permutation of any epoch can be
drawn again from the seed, so the loader's state needs no generator state and no list of indices.
"""

from __future__ import annotations

import torch


class ResumableLoader:
    """Yields lists of dataset indices; `state_dict` / `load_state_dict` save and restore the position."""

    def __init__(self, size: int, batch: int, seed: int) -> None:
        if size < 1 or batch < 1 or batch > size:
            raise ValueError(f"ResumableLoader: need 1 <= batch <= size, got size {size}, batch {batch}")
        self.size, self.batch, self.seed = size, batch, seed
        self.epoch, self.cursor = 0, 0  # next batch: order(epoch)[cursor:cursor + batch]

    def order(self, epoch: int) -> list[int]:
        """The permutation of epoch `epoch`: torch.randperm(size) from a generator seeded seed + epoch."""
        g = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(self.size, generator=g).tolist()

    def next_indices(self) -> list[int]:
        """The next batch of `batch` indices; starts the next epoch (cursor 0) when fewer than
        `batch` indices are left in this one."""
        # BEGIN SOLUTION
        if self.cursor + self.batch > self.size:
            self.epoch, self.cursor = self.epoch + 1, 0
        out = self.order(self.epoch)[self.cursor:self.cursor + self.batch]
        self.cursor += self.batch
        return out
        # END SOLUTION

    def state_dict(self) -> dict:
        """{"epoch", "cursor"}: where the next batch starts."""
        # BEGIN SOLUTION
        return {"epoch": self.epoch, "cursor": self.cursor}
        # END SOLUTION

    def load_state_dict(self, state: dict) -> None:
        """Continue from the position `state_dict` saved."""
        # BEGIN SOLUTION
        self.epoch, self.cursor = int(state["epoch"]), int(state["cursor"])
        # END SOLUTION
