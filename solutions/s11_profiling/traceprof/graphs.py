"""CUDA graphs for a step function: capture once per batch size, replay with one launch.

A graph fixes every tensor's address and shape, so the three classic failures are:
1. dynamic shapes: a replay cannot take a new batch size; pad the batch to the next captured size
   (a bucket) and copy it into the static input buffer;
2. a host sync inside the capture (.item(), .tolist(), .cpu(), printing a CUDA tensor): the capture
   fails, and the error leaves the stream capture broken; say so clearly;
3. allocator pools: a replay writes its output into the graph's private memory, which the next
   replay (of any graph sharing the pool) overwrites; hand callers a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor


class GraphCaptureError(RuntimeError):
    """The step function cannot be captured (it synchronizes with the host during capture)."""


def bucket_size(batch: int, sizes: Sequence[int]) -> int:
    """The smallest captured size >= batch. Raises ValueError when batch < 1 or above every size."""
    # BEGIN SOLUTION
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    fits = [s for s in sizes if s >= batch]
    if not fits:
        raise ValueError(f"batch {batch} exceeds the largest captured size {max(sizes)}; run it eagerly")
    return min(fits)
    # END SOLUTION


class GraphedStep:
    """`fn(x) -> Tensor` captured as one CUDA graph per batch size in `sizes`, all sharing one memory pool.

    fn maps x of shape (B, *feature_shape) to an output whose first dimension is B, and rows do not
    mix (row i of the output depends on row i of x only). `example` (any batch, on the GPU) gives the
    feature shape, dtype and device. Construction warms fn up on a side stream, then captures each
    size (largest first, so smaller graphs reuse its pool memory). Raises GraphCaptureError (with the
    original error chained) when fn synchronizes with the host during capture.

    step(x) with x of shape (b, *feature_shape): pads to bucket_size(b, sizes) by copying x into the
    static input buffer, replays that graph and returns a new tensor holding the first b output rows
    (not a view of the graph's pool: the next replay would overwrite it).
    """

    def __init__(self, fn: Callable[[Tensor], Tensor], example: Tensor, sizes: Sequence[int]) -> None:
        # BEGIN SOLUTION
        if not sizes or any(s < 1 for s in sizes):
            raise ValueError(f"sizes must be positive batch sizes, got {list(sizes)}")
        self.fn, self.sizes = fn, sorted(set(sizes))
        self.static_in = torch.zeros((self.sizes[-1], *example.shape[1:]), dtype=example.dtype,
                                     device=example.device)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, Tensor] = {}
        side = torch.cuda.Stream(device=example.device)
        side.wait_stream(torch.cuda.current_stream(example.device))
        with torch.cuda.stream(side):
            for s in self.sizes:
                fn(self.static_in[:s])  # warm-up: lazy init, compiled kernels, cuBLAS workspaces
        torch.cuda.current_stream(example.device).wait_stream(side)
        pool = None
        for s in reversed(self.sizes):
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph, pool=pool):
                    self.outputs[s] = fn(self.static_in[:s])
            except RuntimeError as err:
                raise GraphCaptureError(
                    f"capturing batch {s} failed: the step synchronizes with the host inside the capture "
                    f"(.item(), .tolist(), .cpu() or a data-dependent shape); move it out of the step") from err
            pool = pool if pool is not None else graph.pool()
            self.graphs[s] = graph
        # END SOLUTION

    def step(self, x: Tensor) -> Tensor:
        """fn(x) by replaying the graph of x's bucket; a fresh (b, ...) tensor."""
        # BEGIN SOLUTION
        b = x.shape[0]
        s = bucket_size(b, self.sizes)
        if tuple(x.shape[1:]) != tuple(self.static_in.shape[1:]):
            raise ValueError(f"x has feature shape {tuple(x.shape[1:])}, captured {tuple(self.static_in.shape[1:])}")
        self.static_in[:b].copy_(x)
        self.static_in[b:s].zero_()
        self.graphs[s].replay()
        return self.outputs[s][:b].clone()
        # END SOLUTION
