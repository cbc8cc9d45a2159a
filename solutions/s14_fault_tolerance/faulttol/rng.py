"""The random state a resume needs: every generator the training step draws from.

Dropout draws from torch's global CPU generator; data augmentation often draws from Python's
`random`. Each rank has its own streams (seeded with the rank), so each rank saves its own.
"""

from __future__ import annotations

import random

import torch


def capture_rng() -> dict:
    """{"torch": the global CPU generator's state (a uint8 tensor), "python": random.getstate()}:
    copies, unaffected by later draws."""
    # BEGIN SOLUTION
    return {"torch": torch.get_rng_state(), "python": random.getstate()}
    # END SOLUTION


def restore_rng(state: dict) -> None:
    """Put both generators back where `capture_rng` found them."""
    # BEGIN SOLUTION
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    # END SOLUTION
