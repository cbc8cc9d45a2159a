"""Tensor bytes between the two processes, through a shared-memory arena per direction.

Each direction has one `memfd` (created by the judge, inherited by the worker): the sender writes
a message's tensors one after another from offset 0, the receiver copies them out while it decodes
the message (a receiver never keeps a view of the arena: the sender reuses it for its next message,
and the other process can write it at any time). The frame header carries the arena size the
message needs, so a receiver remaps after the sender grew the file.

Small CUDA tensors cross through host memory here (device -> arena -> device); large ones by CUDA
IPC handle (cuda_ipc.py).
"""

from __future__ import annotations

import mmap
import os
from typing import Any

from autograder.protocol.wire import ProtocolError, expect

INITIAL_BYTES = 64 << 20
ALIGN = 64


def new_arena_fd(name: str) -> int:
    fd = os.memfd_create(name, 0)
    os.ftruncate(fd, INITIAL_BYTES)
    return fd


class Arena:
    """One direction's shared file; `writer` sides append, `reader` sides copy out."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size = 0
        self._map: mmap.mmap | None = None
        self._bytes: Any = None  # a uint8 tensor over the map, made when a tensor first crosses
        self.offset = 0
        self._remap(os.fstat(fd).st_size)

    def _remap(self, size: int) -> None:
        if self._map is not None:
            self._bytes = None
            try:
                self._map.close()
            except BufferError:  # a decoded view still alive somewhere: leave the old map to the GC
                pass
        self._map = mmap.mmap(self.fd, size)
        self.size = size

    @property
    def _view(self) -> Any:
        """The map as a torch uint8 tensor (torch is imported only once a tensor crosses)."""
        if self._bytes is None:
            import torch

            self._bytes = torch.frombuffer(self._map, dtype=torch.uint8)
        return self._bytes

    # ---- writing ------------------------------------------------------------------------------
    def reset(self) -> None:
        self.offset = 0

    def put(self, tensor: Any) -> tuple[int, int]:
        """Copy `tensor`'s bytes in; (offset, nbytes)."""
        import torch

        flat = tensor.detach()
        if flat.device.type != "cpu":
            flat = flat.cpu()
        flat = flat.contiguous().reshape(-1)
        nbytes = flat.numel() * flat.element_size()
        start = -(-self.offset // ALIGN) * ALIGN
        if start + nbytes > self.size:
            grown = -(-(start + nbytes) // INITIAL_BYTES) * INITIAL_BYTES  # what this message needs (RLIMIT_FSIZE)
            os.ftruncate(self.fd, grown)
            self._remap(grown)
        if nbytes:
            src = flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8)
            self._view[start : start + nbytes].copy_(src)
        self.offset = start + nbytes
        return start, nbytes

    # ---- reading ------------------------------------------------------------------------------
    def ensure(self, size: int) -> None:
        if size > self.size:
            if size > os.fstat(self.fd).st_size:
                raise ProtocolError(f"the sender claims an arena of {size} bytes the file does not have")
            self._remap(size)

    def take(self, offset: Any, nbytes: Any, dtype: Any, shape: Any) -> Any:
        """A private copy of the bytes at [offset, offset + nbytes) as a tensor of dtype and shape."""
        import torch

        offset, nbytes = expect(offset, int, "tensor offset"), expect(nbytes, int, "tensor size")
        shape = [expect(s, int, "tensor shape") for s in expect(shape, list, "tensor shape")]
        if offset < 0 or nbytes < 0 or offset + nbytes > self.size or any(s < 0 for s in shape):
            raise ProtocolError("a tensor outside the arena")
        numel = 1
        for s in shape:
            numel *= s
        if numel * dtype.itemsize != nbytes:
            raise ProtocolError(f"tensor bytes ({nbytes}) do not match shape {shape} of {dtype}")
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype)
        raw = self._view[offset : offset + nbytes].clone()
        if dtype == torch.bool:
            return raw.to(torch.bool).reshape(shape)
        return raw.view(dtype).reshape(shape)
