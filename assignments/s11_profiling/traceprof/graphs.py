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
    raise NotImplementedError("s11.7: bucket_size")


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
        raise NotImplementedError("s11.8: GraphedStep.__init__")

    def step(self, x: Tensor) -> Tensor:
        """fn(x) by replaying the graph of x's bucket; a fresh (b, ...) tensor."""
        raise NotImplementedError("s11.9: GraphedStep.step")
