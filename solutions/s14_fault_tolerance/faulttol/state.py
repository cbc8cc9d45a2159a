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
    # BEGIN SOLUTION
    return {
        "step": step,
        "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "optimizer": copy.deepcopy(optimizer.state_dict()),
        "scheduler": copy.deepcopy(scheduler.state_dict()),
        "loader": loader.state_dict(),
        "rng": capture_rng(),
    }
    # END SOLUTION


def restore_training_state(state: dict, model: nn.Module, optimizer: torch.optim.Optimizer,
                           scheduler: torch.optim.lr_scheduler.LRScheduler, loader: ResumableLoader) -> int:
    """Load every part of `state` into the live objects; return the steps done (state["step"])."""
    # BEGIN SOLUTION
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    loader.load_state_dict(state["loader"])
    restore_rng(state["rng"])
    return int(state["step"])
    # END SOLUTION


def common_resume_step(root: str | os.PathLike, group: dist.ProcessGroup | None = None) -> int:
    """The step every rank of `group` resumes from: the highest step whose checkpoint is valid in
    every rank's `root` (each rank checks its own folder; checkpoints are taken at the same steps on
    every rank and older ones are kept). -1 when some rank has none. Every rank must call it."""
    # BEGIN SOLUTION
    path = latest_valid(root)
    mine = read_checkpoint(path)[0] if path is not None else -1
    step = torch.tensor([mine], dtype=torch.int64)
    dist.all_reduce(step, op=dist.ReduceOp.MIN, group=group)
    return int(step.item())
    # END SOLUTION
