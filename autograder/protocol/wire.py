"""Frames on a socket, and the tagged tree of builtins every value crosses as.

A frame is an 8-byte length and a pickle that may build only builtins: `SafeUnpickler` resolves no
global at all, so whatever the other side sends, unpickling cannot construct one of its objects or
call one of its functions. Values are walked into a *tagged tree* before pickling:

    None, bool, int, float, str, bytes   as themselves (exact types)
    list, dict                           as list / dict of encoded items
    ("T", [items])                       a tuple;  ("S", [...]) a set;  ("F", [...]) a frozenset
    ("X", kind, *payload)                anything else, through the side's own `Codec` hooks

so a tuple on the wire is always a tag, and the receiving side decides what each kind becomes.
"""

from __future__ import annotations

import io
import pickle
import socket
import struct
from typing import Any

HEADER = struct.Struct("<QQ")  # frame length, arena size the frame's tensors need
MAX_FRAME = 1 << 30


class ProtocolError(RuntimeError):
    """The other side sent something this side cannot read: a broken or hostile peer."""


class PeerGone(ConnectionError):
    """The other side closed the socket (it exited, crashed or was killed)."""


class SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise ProtocolError(f"refused to unpickle the global {module}.{name}: frames carry builtins only")

    def persistent_load(self, pid: Any) -> Any:
        raise ProtocolError("refused a persistent id in a frame")


def loads(data: bytes) -> Any:
    return SafeUnpickler(io.BytesIO(data)).load()


def send_frame(sock: socket.socket, tree: Any, arena_size: int) -> None:
    body = pickle.dumps(tree, protocol=5)
    sock.sendall(HEADER.pack(len(body), arena_size) + body)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise PeerGone("the other side closed the connection")
        got += k
    return bytes(buf)


def recv_frame(sock: socket.socket) -> tuple[Any, int]:
    """(tagged tree, arena size the sender's tensors need)."""
    length, arena_size = HEADER.unpack(_recv_exact(sock, HEADER.size))
    if length > MAX_FRAME:
        raise ProtocolError(f"a frame of {length} bytes is over the {MAX_FRAME}-byte limit")
    try:
        return loads(_recv_exact(sock, length)), arena_size
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError) as exc:
        raise ProtocolError(f"unreadable frame: {exc}") from exc


SCALARS = (type(None), bool, int, float, str, bytes)


class Codec:
    """Walks values to and from the tagged tree; `encode_other` / `decode_other` are the side's
    hooks for everything that is not a builtin container or scalar."""

    def encode(self, value: Any) -> Any:
        kind = type(value)
        if kind in SCALARS:
            return value
        if kind is list:
            return [self.encode(v) for v in value]
        if kind is tuple:
            return ("T", [self.encode(v) for v in value])
        if kind is dict:
            return {self.encode(k): self.encode(v) for k, v in value.items()}
        if kind is set:
            return ("S", [self.encode(v) for v in value])
        if kind is frozenset:
            return ("F", [self.encode(v) for v in value])
        return ("X", *self.encode_other(value))

    def decode(self, tree: Any) -> Any:
        kind = type(tree)
        if kind in SCALARS:
            return tree
        if kind is list:
            return [self.decode(v) for v in tree]
        if kind is dict:
            return {self.decode(k): self.decode(v) for k, v in tree.items()}
        if kind is not tuple or not tree or type(tree[0]) is not str:
            raise ProtocolError(f"malformed value on the wire: {type(tree).__name__}")
        tag = tree[0]
        if tag == "T" and len(tree) == 2 and type(tree[1]) is list:
            return tuple(self.decode(v) for v in tree[1])
        if tag in ("S", "F") and len(tree) == 2 and type(tree[1]) is list:
            items = [self.decode(v) for v in tree[1]]
            return set(items) if tag == "S" else frozenset(items)
        if tag == "X" and len(tree) >= 2 and type(tree[1]) is str:
            return self.decode_other(tree[1], tree[2:])
        raise ProtocolError(f"unknown tag {tag!r} on the wire")

    def encode_other(self, value: Any) -> tuple:
        raise TypeError(f"{type(value).__name__} cannot cross to the other process")

    def decode_other(self, kind: str, payload: tuple) -> Any:
        raise ProtocolError(f"unknown value kind {kind!r}")


def expect(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """`value` if its exact type is `kind`, else a ProtocolError naming `what`."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if type(value) not in kinds:
        raise ProtocolError(f"{what}: expected {'/'.join(k.__name__ for k in kinds)}, got {type(value).__name__}")
    return value

