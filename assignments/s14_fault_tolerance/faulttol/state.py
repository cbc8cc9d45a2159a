"""Everything a resume needs, in one state dict, and the step every rank agrees to resume from.

A run resumes exactly only if it restores all five: the model's weights, the optimizer's state
(Adam's moments and step count), the LR scheduler's position, every random generator the step
draws from, and the data loader's position; plus the number of steps done.
"""

from __future__ import annotations

import copy
import os

import torch
import torch.distributed as dist
from torch import nn

from .files import latest_valid, read_checkpoint
from .loader import ResumableLoader
from .rng import capture_rng, restore_rng


def capture_training_state(model: nn.Module, optimizer: torch.optim.Optimizer,
                           scheduler: torch.optim.lr_scheduler.LRScheduler, loader: ResumableLoader,
                           step: int) -> dict:
    """{"step", "model", "optimizer", "scheduler", "loader", "rng"}: state dicts of each and
    capture_rng(); deep copies (tensors cloned), so later training does not change them."""
    raise NotImplementedError("s14.12: capture_training_state")


def restore_training_state(state: dict, model: nn.Module, optimizer: torch.optim.Optimizer,
                           scheduler: torch.optim.lr_scheduler.LRScheduler, loader: ResumableLoader) -> int:
    """Load every part of `state` into the live objects; return the steps done (state["step"])."""
    raise NotImplementedError("s14.13: restore_training_state")


def common_resume_step(root: str | os.PathLike, group: dist.ProcessGroup | None = None) -> int:
    """The step every rank of `group` resumes from: the highest step whose checkpoint is valid in
    every rank's `root` (each rank checks its own folder; checkpoints are taken at the same steps on
    every rank and older ones are kept). -1 when some rank has none. Every rank must call it."""
    raise NotImplementedError("s14.14: common_resume_step")
