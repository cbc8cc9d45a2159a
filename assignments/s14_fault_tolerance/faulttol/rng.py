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
    raise NotImplementedError("s14.10: capture_rng")


def restore_rng(state: dict) -> None:
    """Put both generators back where `capture_rng` found them."""
    raise NotImplementedError("s14.11: restore_rng")
