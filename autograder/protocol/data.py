"""Plain data both sides encode the same way: tensors, arrays, dtypes, devices and a few builtins
that pickle only through globals (complex, slice, Ellipsis, paths).

A tensor crosses by value: its bytes through the arena (a large CUDA tensor through a CUDA IPC
handle instead, see cuda_ipc.py), its dtype by name (checked against torch's dtypes), its device as
a string, its `requires_grad` flag. The receiver owns a fresh copy (autograd history never crosses). Each side lists the tensors it decoded from a message in
`received` so a call can send back the final value of arguments the callee changed in place.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

from autograder.protocol.arena import Arena
from autograder.protocol.cuda_ipc import IPC_MIN_BYTES, CudaShare, open_shared
from autograder.protocol.wire import Codec, ProtocolError, expect


def _torch() -> Any:
    import torch

    return torch


def _torch_if_loaded() -> Any:
    """torch when this process has imported it (a value cannot be a tensor otherwise), else None."""
    return sys.modules.get("torch")


def dtype_named(name: Any) -> Any:
    torch = _torch()
    value = getattr(torch, expect(name, str, "dtype name"), None)
    if not isinstance(value, torch.dtype):
        raise ProtocolError(f"{name!r} is not a torch dtype")
    return value


TORCH_KINDS = {"tensor", "cuda_tensor", "dtype", "device", "size", "generator"}


class DataCodec(Codec):
    PRIVATE_CUDA_POOL = False  # the judge stages what it shares apart from its own tensors

    def __init__(self, outgoing: Arena, incoming: Arena) -> None:
        self.outgoing, self.incoming = outgoing, incoming
        self.cuda = CudaShare(private_pool=self.PRIVATE_CUDA_POOL)
        self.sent: list[Any] = []      # tensors encoded into the message being built, in order
        self.received: list[Any] = []  # tensors decoded from the last message, in order
        self.sent_generators: list[Any] = []      # torch.Generators, crossing by state
        self._memo: dict[int, tuple] = {}
        self.received_generators: list[Any] = []

    def begin_send(self) -> None:
        self.outgoing.reset()
        self.cuda.reset()
        self.sent = []
        self.sent_generators = []
        self._memo: dict[int, tuple] = {}  # id -> its reference: an object sent twice arrives as one

    def begin_receive(self, arena_size: int) -> None:
        self.incoming.ensure(arena_size)
        self.received = []
        self.received_generators = []

    # ---- encode -------------------------------------------------------------------------------
    def encode_other(self, value: Any) -> tuple:
        if id(value) in self._memo:
            return self._memo[id(value)]
        torch = _torch_if_loaded()
        if torch is None:
            return self._encode_plain(value)
        if isinstance(value, torch.Tensor) and type(value) in (torch.Tensor, torch.nn.Parameter):
            self._memo[id(value)] = ("tensor_again", len(self.sent))
            self.sent.append(value)
            dtype, shape, grad = str(value.dtype).removeprefix("torch."), list(value.shape), bool(value.requires_grad)
            if value.is_cuda and value.numel() * value.element_size() >= IPC_MIN_BYTES:
                return ("cuda_tensor", self.cuda.share(value), dtype, shape, grad)
            offset, nbytes = self.outgoing.put(value)
            return ("tensor", offset, nbytes, dtype, shape, str(value.device), grad)
        if isinstance(value, torch.Generator):  # by state; its final state comes back after the call
            self._memo[id(value)] = ("generator_again", len(self.sent_generators))
            self.sent_generators.append(value)
            return ("generator", str(value.device), self.encode(value.get_state()))
        if isinstance(value, torch.dtype):
            return ("dtype", str(value).removeprefix("torch."))
        if isinstance(value, torch.device):
            return ("device", str(value))
        if type(value) is torch.Size:
            return ("size", [int(s) for s in value])
        return self._encode_plain(value)

    def _encode_plain(self, value: Any) -> tuple:
        if type(value) is complex:
            return ("complex", value.real, value.imag)
        if isinstance(value, dict):  # OrderedDict, defaultdict: a plain dict there
            return ("dict", [[self.encode(k), self.encode(v)] for k, v in value.items()])
        if type(value) is slice:
            return ("slice", self.encode(value.start), self.encode(value.stop), self.encode(value.step))
        if value is Ellipsis:
            return ("ellipsis",)
        if isinstance(value, pathlib.PurePath):
            return ("path", str(value))
        numpy = _numpy_of(value)
        if numpy is not None:
            if isinstance(value, numpy.ndarray) and type(value) is numpy.ndarray and value.dtype != object:
                torch = _torch()
                tensor = torch.from_numpy(value.copy()) if value.dtype != numpy.bool_ else torch.from_numpy(value.astype("uint8"))
                offset, nbytes = self.outgoing.put(tensor)
                return ("ndarray", offset, nbytes, str(value.dtype), list(value.shape))
            if isinstance(value, numpy.generic):
                return ("npscalar", str(value.dtype), self.encode(value.item()))
        return self.encode_reference(value)

    def encode_reference(self, value: Any) -> tuple:
        raise TypeError(f"{type(value).__name__} cannot cross to the other process")

    # ---- decode -------------------------------------------------------------------------------
    def decode_other(self, kind: str, payload: tuple) -> Any:
        torch = _torch() if kind in TORCH_KINDS else None
        if kind == "tensor" and len(payload) == 6:
            offset, nbytes, dtype, shape, device, grad = payload
            tensor = self.incoming.take(offset, nbytes, dtype_named(dtype), shape)
            device = torch.device(expect(device, str, "device"))
            if device.type != "cpu":
                tensor = tensor.to(device)
            if expect(grad, bool, "requires_grad") and tensor.is_floating_point():
                tensor.requires_grad_(True)
            self.received.append(tensor)
            return tensor
        if kind == "cuda_tensor" and len(payload) == 4:
            handle, dtype, shape, grad = payload
            shape = [expect(s, int, "tensor shape") for s in expect(shape, list, "tensor shape")]
            tensor = open_shared(handle, dtype_named(dtype), shape)
            if expect(grad, bool, "requires_grad") and tensor.is_floating_point():
                tensor.requires_grad_(True)
            self.received.append(tensor)
            return tensor
        if kind == "dtype" and len(payload) == 1:
            return dtype_named(payload[0])
        if kind in ("tensor_again", "generator_again") and len(payload) == 1:
            seen = self.received if kind == "tensor_again" else self.received_generators
            index = expect(payload[0], int, "index")
            if not 0 <= index < len(seen):
                raise ProtocolError("a reference to an object not sent before in this message")
            return seen[index]
        if kind == "generator" and len(payload) == 2:
            generator = torch.Generator(device=expect(payload[0], str, "device"))
            generator.set_state(self.decode(payload[1]))
            self.received_generators.append(generator)
            return generator
        if kind == "dict" and len(payload) == 1:
            return {self.decode(k): self.decode(v) for k, v in expect(payload[0], list, "items")}
        if kind == "device" and len(payload) == 1:
            return torch.device(expect(payload[0], str, "device"))
        if kind == "size" and len(payload) == 1:
            return torch.Size([expect(s, int, "size") for s in expect(payload[0], list, "size")])
        if kind == "complex" and len(payload) == 2:
            return complex(expect(payload[0], float, "complex"), expect(payload[1], float, "complex"))
        if kind == "slice" and len(payload) == 3:
            return slice(*(self.decode(p) for p in payload))
        if kind == "ellipsis":
            return Ellipsis
        if kind == "path" and len(payload) == 1:
            return pathlib.Path(expect(payload[0], str, "path"))
        if kind == "ndarray" and len(payload) == 4:
            return self._ndarray(*payload)
        if kind == "npscalar" and len(payload) == 2:
            import numpy

            return numpy.dtype(_numpy_dtype(payload[0])).type(self.decode(payload[1]))
        return self.decode_reference(kind, payload)

    def _ndarray(self, offset: Any, nbytes: Any, dtype: Any, shape: Any) -> Any:
        import numpy

        np_dtype = numpy.dtype(_numpy_dtype(dtype))
        raw = self.incoming.take(offset, nbytes, _torch().uint8, [expect(nbytes, int, "array size")])
        return raw.numpy().view(np_dtype if np_dtype != numpy.bool_ else numpy.uint8).reshape(shape).astype(np_dtype).copy()

    def decode_reference(self, kind: str, payload: tuple) -> Any:
        raise ProtocolError(f"unknown value kind {kind!r}")


_NUMPY_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64", "complex64", "complex128"}


def _numpy_dtype(name: Any) -> str:
    if expect(name, str, "array dtype") not in _NUMPY_DTYPES:
        raise ProtocolError(f"array dtype {name!r} cannot cross")
    return name


def _numpy_of(value: Any) -> Any:
    module = type(value).__module__
    if module == "numpy" or module.startswith("numpy."):
        import numpy

        return numpy
    return None
