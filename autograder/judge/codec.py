"""The judge's side of the wire: its proxies go back as references, the worker's references come
in as proxies, and a judge function handed to the submission becomes a callback id.

Nothing the worker sends makes the judge import a module or build an object of the worker's
choosing: tensors are copied out of the arena, references become `Remote` proxies, enum members
and records become judge values, and a module reference is honoured only inside the package (the
import hook answers those with proxies, never with files from disk).
"""

from __future__ import annotations

import importlib
import weakref
from typing import Any

from autograder.judge.mirrored_errors import mirror_exception
from autograder.judge.proxies import (
    BoundMethod,
    EnumValue,
    ModuleProxy,
    PathRef,
    Peer,
    Record,
    Remote,
)
from autograder.protocol.data import DataCodec
from autograder.protocol.wire import ProtocolError, expect


class StaleReference(RuntimeError):
    """A reference into a worker that was restarted since (after a crash or timeout)."""


class JudgeCodec(DataCodec):
    PRIVATE_CUDA_POOL = True  # the worker may map what the judge shares: a pool holding nothing else

    def __init__(self, client: Peer, outgoing: Any, incoming: Any) -> None:
        super().__init__(outgoing, incoming)
        self.client = client
        self._proxies: dict[tuple[int, int], weakref.ref] = {}
        self._methods: dict[tuple[str, str], frozenset[str]] = {}
        self._cells: dict[tuple[int, int], list[int]] = {}

    # ---- judge values -> wire -----------------------------------------------------------------
    def encode_reference(self, value: Any) -> tuple:
        if isinstance(value, ModuleProxy):
            return ("name", value.__name__)
        if isinstance(value, BoundMethod):
            return self.encode_reference(value.resolve())
        if isinstance(value, Remote):
            generation = object.__getattribute__(value, "_ag_generation")
            path = object.__getattribute__(value, "_ag_path")
            if type(value) is PathRef or (generation != self.client.generation and path):
                return ("name", path)
            if generation != self.client.generation:
                raise StaleReference("this object lived in an earlier worker process (restarted after a crash "
                                     "or timeout); create it again in this test")
            return ("ref", generation, object.__getattribute__(value, "_ag_rid"))
        if isinstance(value, EnumValue):
            return ("enum", value.module, value.qualname, value.name)
        if isinstance(value, type) and hasattr(value, "_ag_path"):
            return ("name", value._ag_path)
        if callable(value):
            return ("callback", self.client.register_callback(value))
        raise TypeError(f"a {type(value).__name__} cannot be passed to the submission's process; pass data "
                        "(tensors, numbers, lists) or run that code in the worker with autograder.testing.in_worker")

    # ---- wire -> judge values -----------------------------------------------------------------
    def decode_reference(self, kind: str, payload: tuple) -> Any:
        if kind == "ref" and len(payload) == 7:
            return self._remote(*payload)
        if kind == "record" and len(payload) == 5:
            generation, rid, type_name, fields, path = payload
            fields = self.decode(fields)
            if type(fields) is not dict or not all(type(k) is str for k in fields):
                raise ProtocolError("malformed record")
            record = Record(self.client, expect(generation, int, "generation"), expect(rid, int, "id"),
                            ("", expect(type_name, str, "type")), fields, sequence=False, path=_opt_str(path))
            self.client.track(record, generation, rid, [1])
            return record
        if kind == "enum" and len(payload) == 4:
            module, qualname, name, value = payload
            return EnumValue(expect(module, str, "module"), expect(qualname, str, "class"), expect(name, str, "name"),
                             self.decode(value))
        if kind == "module" and len(payload) == 1:
            name = expect(payload[0], str, "module")
            package = self.client.package
            if name == package or name.startswith(package + "."):
                return importlib.import_module(name)  # answered by the import hook: a ModuleProxy
            return PathRef(self.client, name)
        if kind == "excclass" and len(payload) == 4:
            module, qualname, bases, _path = payload
            names = [b for b in expect(bases, list, "bases") if type(b) is str]
            return mirror_exception(expect(module, str, "module"), expect(qualname, str, "class"), names)
        raise ProtocolError(f"unknown value kind {kind!r} from the worker")

    def _remote(self, generation: Any, rid: Any, kind: Any, module: Any, name: Any, methods: Any, path: Any) -> Remote:
        generation, rid = expect(generation, int, "generation"), expect(rid, int, "id")
        key = (generation, rid)
        type_name = (expect(module, str, "module"), expect(name, str, "class"))
        if methods is not None:
            self._methods[type_name] = frozenset(m for m in expect(methods, list, "methods") if type(m) is str)
        alive = self._proxies.get(key)
        remote = alive() if alive is not None else None
        if remote is not None:
            self._cells[key][0] += 1  # one more receipt the worker will get back on release
            return remote
        remote = Remote(self.client, generation, rid, expect(kind, str, "kind"), type_name,
                        self._methods.get(type_name, frozenset()), _opt_str(path))
        self._cells[key] = cell = [1]
        self._proxies[key] = weakref.ref(remote)
        self.client.track(remote, generation, rid, cell)
        return remote


def _opt_str(value: Any) -> str | None:
    return value if type(value) is str else None
