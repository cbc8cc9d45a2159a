"""ZeRO (Rajbhandari et al., SC'20): data parallelism whose ranks split the training state
instead of each holding all of it. Adam, fp32, over one flat vector of all parameters (sharding.py):

    stage 1: each rank keeps Adam's moments for its shard only; gradients are all-reduced whole,
             each rank updates its shard of the weights, an all-gather gives everyone all weights.
    stage 2: also the gradients: a reduce-scatter leaves each rank the average of its shard only,
             and the full gradients are dropped.
    stage 3: also the weights: between steps a rank holds its shard of the weights only;
             `gather_parameters` all-gathers the whole model before a forward pass (here the whole
             model at once: one FSDP unit) and `step` releases it again.

Every stage takes the same steps as one process running torch.optim.Adam on the whole batch
(gradients averaged over ranks). Usage per step: gather_parameters(); loss.backward(); step().
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn

from .sharding import flatten, shard_bounds, shard_size


@dataclass(frozen=True)
class HeldBytes:
    """Bytes of training state one rank holds between steps."""

    params: int
    grads: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer


class ZeroAdam:
    """Adam (torch.optim.Adam's update, no weight decay) with ZeRO stage 1, 2 or 3 sharding."""

    def __init__(self, module: nn.Module, *, stage: int, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 group: dist.ProcessGroup | None = None) -> None:
        if stage not in (1, 2, 3):
            raise ValueError(f"ZeroAdam: stage must be 1, 2 or 3, got {stage!r}")
        if lr <= 0 or eps <= 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"ZeroAdam: need lr > 0, eps > 0, 0 <= betas < 1; got {lr}, {eps}, {betas}")
        self.stage, self.lr, self.betas, self.eps, self.group = stage, lr, betas, eps, group
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.shapes = [p.shape for p in self.params]
        self.numel = sum(p.numel() for p in self.params)
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.start, self.end = shard_bounds(self.numel, self.rank, self.world)
        self.padded = shard_size(self.numel, self.world) * self.world
        self.step_count = 0
        self.grad_shard: Tensor | None = None
        self._init_state()

    def _src(self) -> int:
        return dist.get_global_rank(self.group, 0) if self.group is not None else 0

    def _init_state(self) -> None:
        """Rank 0's weights everywhere; this rank's shard of them and zero moments."""
        full = flatten([p.detach() for p in self.params], self.padded)
        dist.broadcast(full, src=self._src(), group=self.group)
        own = self.end - self.start
        self.exp_avg = torch.zeros(own)
        self.exp_avg_sq = torch.zeros(own)
        self.param_shard = full[self.start:self.end].clone()
        self._set_parameters(full)
        if self.stage == 3:
            self._release_parameters()

    def _set_parameters(self, full: Tensor) -> None:
        """Point every parameter at its slice of the flat (padded,) vector `full`."""
        offset = 0
        for p, shape in zip(self.params, self.shapes):
            n = shape.numel()
            p.data = full[offset:offset + n].view(shape)
            offset += n

    def _release_parameters(self) -> None:
        """Stage 3 between steps: the module's parameters hold nothing."""
        for p in self.params:
            p.data = torch.empty(0)

    def _all_gather(self) -> Tensor:
        """The whole flat weights (padded,) from every rank's shard."""
        # BEGIN SOLUTION
        chunk = torch.zeros(self.padded // self.world)
        chunk[:self.end - self.start] = self.param_shard
        full = torch.empty(self.padded)
        dist.all_gather_single(full, chunk, group=self.group)
        return full
        # END SOLUTION

    def gather_parameters(self) -> None:
        """Before a forward pass: drop the last step's gradients (stage 1 keeps them whole until
        here) and, stage 3, all-gather the weights."""
        for p in self.params:
            p.grad = None
        self.grad_shard = None
        if self.stage == 3:
            self._set_parameters(self._all_gather())

    def _reduce_gradients(self) -> Tensor:
        """The average over ranks of this rank's shard of the gradients, (end - start,). Stage 1
        all-reduces them whole (and keeps them); stages 2 and 3 reduce-scatter and drop the
        full gradients."""
        # BEGIN SOLUTION
        grads = [p.grad if p.grad is not None else torch.zeros(s) for p, s in zip(self.params, self.shapes)]
        flat = flatten(grads, self.padded)
        if self.stage == 1:
            dist.all_reduce(flat, group=self.group)
            flat.div_(self.world)
            offset = 0
            for p, s in zip(self.params, self.shapes):
                p.grad = flat[offset:offset + s.numel()].view(s)
                offset += s.numel()
            return flat[self.start:self.end]
        shard = torch.empty(self.padded // self.world)
        dist.reduce_scatter_single(shard, flat, group=self.group)
        for p in self.params:
            p.grad = None
        return shard[:self.end - self.start].div_(self.world)
        # END SOLUTION

    def _adam_update(self, grad: Tensor) -> None:
        """torch.optim.Adam's update (single-tensor form) of param_shard from `grad`, in place."""
        # BEGIN SOLUTION
        beta1, beta2 = self.betas
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias1 = 1 - beta1 ** self.step_count
        bias2_sqrt = (1 - beta2 ** self.step_count) ** 0.5
        denom = (self.exp_avg_sq.sqrt() / bias2_sqrt).add_(self.eps)
        self.param_shard.addcdiv_(self.exp_avg, denom, value=-self.lr / bias1)
        # END SOLUTION

    def step(self) -> None:
        """After loss.backward(): average the gradients, update this rank's shard, and leave the
        weights whole (stages 1 and 2) or released (stage 3)."""
        # BEGIN SOLUTION
        self.step_count += 1
        self.grad_shard = self._reduce_gradients()
        self._adam_update(self.grad_shard)
        if self.stage == 3:
            self._release_parameters()
        else:
            self._set_parameters(self._all_gather())
        if self.stage == 1:
            self.grad_shard = None  # stage 1 keeps the whole gradients in the .grads instead
        # END SOLUTION

    def full_parameters(self) -> list[Tensor]:
        """Copies of the whole weights (an all-gather: every rank must call it), shaped like the
        module's parameters."""
        full, out, offset = self._all_gather(), [], 0
        for s in self.shapes:
            out.append(full[offset:offset + s.numel()].view(s).clone())
            offset += s.numel()
        return out

    def held_bytes(self) -> HeldBytes:
        """What this rank holds between steps (after step()), in bytes: the module's weights (or,
        stage 3, its shard), gradients (the .grads, or the reduced shard), and in the optimizer
        Adam's two moments plus (stages 1 and 2) the fp32 master copy of the shard."""
        # BEGIN SOLUTION
        def nbytes(tensors) -> int:
            return sum(t.numel() * t.element_size() for t in tensors if t is not None)

        moments = nbytes([self.exp_avg, self.exp_avg_sq])
        grads = nbytes([p.grad for p in self.params]) + nbytes([self.grad_shard])
        if self.stage == 3:  # the shard is the weights themselves
            return HeldBytes(params=nbytes([self.param_shard]), grads=grads, optimizer=moments)
        # stages 1 and 2: whole weights, and the shard is a master copy beside the moments
        params = nbytes([p.data for p in self.params])
        return HeldBytes(params=params, grads=grads, optimizer=moments + nbytes([self.param_shard]))
        # END SOLUTION
