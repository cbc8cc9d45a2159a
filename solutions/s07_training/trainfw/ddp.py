"""Distributed data parallelism from scratch: every rank holds the whole model, computes gradients
on its own part of the global batch, and averages them with the others before the optimizer step.

The averaging overlaps the backward pass (Li et al., VLDB 2020): a post-accumulate-grad hook on
every parameter marks its gradient ready; when every gradient of a bucket is ready the bucket's
all-reduce is launched asynchronously, and `finish_gradient_sync` waits for all of them (before
the optimizer step) and writes the averages back into the `.grad`s. Buckets are launched in
bucket order on every rank, so every rank issues the same collectives in the same order.

Unused parameters (find_unused_parameters): a parameter the forward pass did not reach gets no
gradient and no hook call, so its bucket would never fill. `forward` walks the autograd graph of
the output to find them, and the first hook of the backward marks them ready (their gradient
counts as zeros), as torch's reducer does.

After the first step the buckets are rebuilt in the order the gradients became ready on rank 0
(broadcast, so that every rank builds the same buckets).
"""

from __future__ import annotations

from functools import partial

import torch
import torch.distributed as dist
from torch import Tensor, nn

from .buckets import bucket_assignment


def reachable_parameters(outputs: Tensor | tuple | list | dict) -> set[int]:
    """ids of the leaf tensors the autograd graph of `outputs` accumulates gradients into."""
    tensors = list(outputs.values()) if isinstance(outputs, dict) else (
        list(outputs) if isinstance(outputs, (tuple, list)) else [outputs])
    stack = [t.grad_fn for t in tensors if isinstance(t, Tensor) and t.grad_fn is not None]
    seen, found = set(), set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if hasattr(fn, "variable"):  # AccumulateGrad: the edge into a leaf parameter
            found.add(id(fn.variable))
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return found


class DDP(nn.Module):
    """Wraps `module`; call it like the module, then loss.backward(), then finish_gradient_sync(),
    then the optimizer step. `buckets` lists parameter indices (registration order of
    module.parameters()); `ready_order` is the order the last backward marked them ready."""

    def __init__(self, module: nn.Module, bucket_cap_bytes: int = 25 * 2**20,
                 group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        self.module = module
        self.group = group
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.cap = bucket_cap_bytes
        self.sizes = [p.numel() * p.element_size() for p in self.params]
        self.buckets = bucket_assignment(self.sizes, self.cap)
        self.rebuilt = False
        self.ready_order: list[int] = []
        self._broadcast_parameters()
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(partial(self._hook, i))
        self._reset([])

    def _broadcast_parameters(self) -> None:
        """Every rank starts from rank 0's weights."""
        src = dist.get_global_rank(self.group, 0) if self.group is not None else 0
        with torch.no_grad():
            for p in self.params:
                dist.broadcast(p.data, src=src, group=self.group)

    def _reset(self, unused: list[int]) -> None:
        """Per-step bookkeeping: what is pending in each bucket, what is launched."""
        self._bucket_of = {i: b for b, bucket in enumerate(self.buckets) for i in bucket}
        self._pending = [len(bucket) for bucket in self.buckets]
        self._next_bucket = 0
        self._works: list = [None] * len(self.buckets)
        self._flats: list[Tensor | None] = [None] * len(self.buckets)
        self._unused = unused
        self._unused_marked = False
        self.ready_order = []

    def forward(self, *args, **kwargs):
        out = self.module(*args, **kwargs)
        if torch.is_grad_enabled():
            # BEGIN SOLUTION
            reached = reachable_parameters(out)
            self._reset([i for i, p in enumerate(self.params) if id(p) not in reached])
            # END SOLUTION
        return out

    def _hook(self, index: int, param: Tensor) -> None:
        """Called by autograd once param.grad holds this backward's gradient."""
        # BEGIN SOLUTION
        if not self._unused_marked:
            self._unused_marked = True
            for i in self._unused:
                self._mark_ready(i)
        self._mark_ready(index)
        # END SOLUTION

    def _mark_ready(self, index: int) -> None:
        """One more gradient of its bucket is ready; launch every bucket that is now complete,
        in bucket order (a later complete bucket waits for the earlier ones)."""
        # BEGIN SOLUTION
        self.ready_order.append(index)
        self._pending[self._bucket_of[index]] -= 1
        while self._next_bucket < len(self.buckets) and self._pending[self._next_bucket] == 0:
            self._launch(self._next_bucket)
            self._next_bucket += 1
        # END SOLUTION

    def _launch(self, b: int) -> None:
        """Flatten bucket b's gradients (zeros for a parameter without one) into one buffer and
        start its all-reduce without waiting for it."""
        # BEGIN SOLUTION
        grads = [self.params[i].grad if self.params[i].grad is not None else torch.zeros_like(self.params[i])
                 for i in self.buckets[b]]
        flat = torch.cat([g.reshape(-1) for g in grads])
        self._flats[b] = flat
        self._works[b] = dist.all_reduce(flat, group=self.group, async_op=True)
        # END SOLUTION

    def finish_gradient_sync(self) -> None:
        """Wait for every bucket's all-reduce and write the averaged gradients into each `.grad`
        (also of unused parameters: zeros averaged with the others'). Then, after the first step,
        rebuild the buckets in rank 0's ready order."""
        # BEGIN SOLUTION
        if not self._unused_marked:  # no hook ran at all: every parameter was unused here
            self._unused_marked = True
            for i in self._unused or range(len(self.params)):
                self._mark_ready(i)
        world = dist.get_world_size(self.group)
        for b, bucket in enumerate(self.buckets):
            self._works[b].wait()
            flat = self._flats[b].div_(world)
            offset = 0
            for i in bucket:
                p = self.params[i]
                p.grad = flat[offset:offset + p.numel()].view_as(p).clone()
                offset += p.numel()
        if not self.rebuilt:
            self._rebuild_buckets()
        self._reset(self._unused)
        # END SOLUTION

    def _rebuild_buckets(self) -> None:
        """Buckets in the order rank 0's gradients became ready in the first backward."""
        # BEGIN SOLUTION
        order = torch.tensor(self.ready_order, dtype=torch.int64)
        src = dist.get_global_rank(self.group, 0) if self.group is not None else 0
        dist.broadcast(order, src=src, group=self.group)
        self.buckets = bucket_assignment(self.sizes, self.cap, order.tolist())
        self.rebuilt = True
        # END SOLUTION
