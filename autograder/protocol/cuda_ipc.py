"""Large CUDA tensors cross by CUDA IPC handle: no trip through host memory.

The sender copies the tensor into a fresh contiguous block, shares that block's allocation
(`cudaIpcGetMemHandle` through torch's `_share_cuda_`: a handle, an offset, a reference counter
and an event the receiver waits on) and keeps the copy alive until its next message. The receiver
opens the handle, copies the bytes into memory of its own and lets the mapping go.

An IPC handle maps the allocator's whole segment, not just the block, and the other process may
write through it at any time. So the judge stages what it sends in a private memory pool
(`private_pool=True`): the segments the worker can map hold nothing but copies already sent to
it, never the judge's inputs, oracles or results. What the judge receives it copies before use.
"""

from __future__ import annotations

from typing import Any

from autograder.protocol.wire import ProtocolError, expect

IPC_MIN_BYTES = 1 << 20  # below this, the host bounce is cheaper than a handle and an event


def _torch() -> Any:
    import torch

    return torch


class CudaShare:
    """The sending side: stages each shared copy and keeps it until `reset` (the next message)."""

    def __init__(self, private_pool: bool) -> None:
        self.private_pool = private_pool
        self._pool: Any = None
        self._kept: list[Any] = []

    def reset(self) -> None:
        self._kept = []

    def share(self, tensor: Any) -> list:
        """[device index, handle, storage bytes, storage offset, ref-counter handle and offset,
        event handle, event sync] for a private contiguous copy of `tensor`."""
        torch = _torch()
        source = tensor.detach()
        if self.private_pool:
            if self._pool is None:
                self._pool = torch.cuda.MemPool()
            with torch.cuda.use_mem_pool(self._pool, device=source.device):
                copy = torch.empty(source.shape, dtype=source.dtype, device=source.device)
        else:
            copy = torch.empty(source.shape, dtype=source.dtype, device=source.device)
        copy.copy_(source)
        self._kept.append(copy)
        shared = list(copy.untyped_storage()._share_cuda_())
        return [shared[0], bytes(shared[1]), *shared[2:4], bytes(shared[4]), shared[5], bytes(shared[6]),
                bool(shared[7])]

    def pool_segments(self) -> list[tuple[int, int]]:
        """(address, size) of every segment of the private pool (for the tests of this boundary)."""
        if self._pool is None:
            return []
        return [(s["address"], s["total_size"]) for s in self._pool.snapshot()]


def open_shared(handle: Any, dtype: Any, shape: list[int]) -> Any:
    """A private copy, on the same device, of the tensor another process shared as `handle`."""
    torch = _torch()
    fields = expect(handle, list, "CUDA handle")
    if len(fields) != 8:
        raise ProtocolError("a CUDA handle has 8 fields")
    device, ipc, size, offset, counter, counter_offset, event, sync = fields
    for value, kind, what in ((device, int, "device"), (ipc, bytes, "handle"), (size, int, "size"),
                              (offset, int, "offset"), (counter, bytes, "counter"),
                              (counter_offset, int, "counter offset"), (event, bytes, "event"), (sync, bool, "sync")):
        expect(value, kind, what)
    if any(s < 0 for s in shape):
        raise ProtocolError("a negative tensor dimension")
    numel = 1
    for s in shape:
        numel *= s
    if numel * dtype.itemsize > size or size < 0 or offset < 0:
        raise ProtocolError(f"a CUDA handle of {size} bytes cannot hold {shape} of {dtype}")
    torch.cuda._lazy_init()
    storage = torch.UntypedStorage._new_shared_cuda(device, ipc, size, offset, counter, counter_offset, event, sync)
    view = torch.empty(0, dtype=dtype, device=f"cuda:{device}").set_(storage, 0, shape)
    private = view.clone()
    torch.cuda.current_stream(private.device).synchronize()  # the copy is done before the mapping goes
    del view, storage
    return private
