"""The worker's side of the wire: its objects become references, the judge's references become
its objects again.

What a student call returns is sent as data when it is data (builtins, tensors, arrays) and as a
*reference* (an id into this process's object table) when it is an object that lives here: an
engine, a scheduler, a class, a function. The judge holds a proxy and sends the id back to use it.
Enum members and immutable records (frozen dataclasses, named tuples) also carry their values, so
the judge can compare them without asking this process anything.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import importlib
import inspect
import types
from collections.abc import Callable
from typing import Any

from autograder.protocol.data import DataCodec
from autograder.protocol.wire import ProtocolError, expect

BUILTIN_EXCEPTIONS = {name for name, value in vars(builtins).items()
                      if isinstance(value, type) and issubclass(value, Exception)}


class ObjectTable:
    """rid -> object, with the number of times each id was sent (the judge returns receipts)."""

    def __init__(self) -> None:
        self._objects: dict[int, Any] = {}
        self._sent: dict[int, int] = {}
        self._by_identity: dict[int, int] = {}
        self._next = 1
        self.described: set[type] = set()  # types whose method names the judge already has

    def add(self, obj: Any) -> int:
        rid = self._by_identity.get(id(obj))
        if rid is None or self._objects.get(rid) is not obj:
            rid, self._next = self._next, self._next + 1
            self._objects[rid] = obj
            self._by_identity[id(obj)] = rid
        self._sent[rid] = self._sent.get(rid, 0) + 1
        return rid

    def get(self, rid: Any) -> Any:
        if expect(rid, int, "reference id") not in self._objects:
            raise ProtocolError(f"no object with reference id {rid} in the worker")
        return self._objects[rid]

    def release(self, rid: int, receipts: int) -> None:
        left = self._sent.get(rid, 0) - receipts
        if left > 0:
            self._sent[rid] = left
            return
        obj = self._objects.pop(rid, None)
        self._sent.pop(rid, None)
        if obj is not None and self._by_identity.get(id(obj)) == rid:
            del self._by_identity[id(obj)]


def qualified(obj: Any) -> tuple[str, str]:
    return getattr(obj, "__module__", "?") or "?", getattr(obj, "__qualname__", type(obj).__qualname__)


def method_names(cls: type) -> list[str]:
    """Public plain methods of `cls` (obj.name(...) then costs one round trip, not two)."""
    names = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name, None)
        if isinstance(attr, (types.FunctionType, staticmethod, classmethod)):
            names.append(name)
    return names


def exception_bases(cls: type) -> list[str]:
    """Builtin Exception classes in the MRO of `cls`: what the judge's mirror class derives from."""
    return [c.__name__ for c in cls.__mro__ if c.__module__ == "builtins" and c.__name__ in BUILTIN_EXCEPTIONS]


class WorkerCodec(DataCodec):
    def __init__(self, outgoing: Any, incoming: Any, table: ObjectTable, generation: int,
                 package: str, call_back: Callable[[int, tuple, dict], Any]) -> None:
        super().__init__(outgoing, incoming)
        self.table, self.generation, self.package = table, generation, package
        self._call_back = call_back
        self.path: str | None = None  # the dotted path of the value being encoded, when it has one

    # ---- this process's objects -> references --------------------------------------------------
    def encode_reference(self, value: Any) -> tuple:
        path, self.path = self.path, None
        if isinstance(value, enum.Enum):
            module, name = qualified(type(value))
            return ("enum", module, name, value.name, self.encode(value.value))
        if isinstance(value, types.ModuleType):
            return ("module", value.__name__)
        if isinstance(value, type) and issubclass(value, BaseException):
            module, name = qualified(value)
            return ("excclass", module, name, exception_bases(value), path)
        record = self._record_fields(value)
        rid = self.table.add(value)
        if record is not None:
            return ("record", self.generation, rid, qualified(type(value))[1], self.encode(record), path)
        kind = "class" if isinstance(value, type) else "function" if callable(value) and not _has_dict(value) else "object"
        methods = None
        if kind == "object" and type(value) not in self.table.described:
            self.table.described.add(type(value))
            methods = method_names(type(value))
        module, name = qualified(value if kind != "object" else type(value))
        return ("ref", self.generation, rid, kind, module, name, methods, path)

    @staticmethod
    def _record_fields(value: Any) -> dict[str, Any] | None:
        cls = type(value)
        if not isinstance(value, type) and dataclasses.is_dataclass(value) and cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, tuple) and hasattr(cls, "_fields"):
            return dict(zip(cls._fields, value, strict=True))
        return None

    # ---- the judge's references -> this process's objects ---------------------------------------
    def decode_reference(self, kind: str, payload: tuple) -> Any:
        if kind in ("ref", "record") and len(payload) == 2:
            generation, rid = payload
            if generation != self.generation:
                raise ProtocolError("this object lived in an earlier worker (restarted after a crash or timeout)")
            return self.table.get(rid)
        if kind == "name" and len(payload) == 1:
            return self.resolve(expect(payload[0], str, "path"))
        if kind == "enum" and len(payload) == 3:
            cls = self.resolve(f"{expect(payload[0], str, 'module')}.{expect(payload[1], str, 'class')}")
            return cls[expect(payload[2], str, "member")]
        if kind == "callback" and len(payload) == 1:
            return self._callback_stub(expect(payload[0], int, "callback id"))
        raise ProtocolError(f"unknown value kind {kind!r} from the judge")

    def resolve(self, dotted: str) -> Any:
        """The object at `module.attr.attr` (the longest importable module prefix first)."""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            module_name = ".".join(parts[:cut])
            try:
                obj = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name is not None and not module_name.startswith(exc.name):
                    raise
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            return obj
        raise ModuleNotFoundError(f"no module for {dotted}")

    def _callback_stub(self, cid: int) -> Callable[..., Any]:
        def judge_function(*args: Any, **kwargs: Any) -> Any:
            return self._call_back(cid, args, kwargs)

        judge_function.__qualname__ = f"judge_function_{cid}"
        return judge_function


def _has_dict(value: Any) -> bool:
    """Callable objects with state (an nn.Module, an engine with __call__) travel as objects."""
    return not isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                                  types.BuiltinMethodType, staticmethod, classmethod)) and hasattr(value, "__dict__")
