"""What the judge holds in place of the student's objects.

- `Remote`: an object that lives in the worker (an engine, a class, a function). Attribute reads,
  calls, `len`, indexing and iteration are requests to the worker; `==` and `hash` are the
  judge's own (identity of the remote object), so an object whose `__eq__` always says yes cannot
  answer an assertion. Iteration returns the items the worker listed, as judge values.
- `PathRef`: a name in the package (`kvcache.BlockManager`) resolved in the worker at each use:
  survives a restarted worker, and stands in for names the package could not import.
- `ModuleProxy`: what `import kvcache` gives the judge.
- `Record`: an immutable value of the package (a frozen dataclass, a named tuple), with its fields
  copied into the judge (compared there); `EnumValue`: an enum member, by class and name.
- Exceptions the submission raises: judge/mirrored_errors.py.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from autograder.protocol.messages import Op


class Peer(Protocol):
    """What proxies and the codec need of the judge's client of one worker (judge/client.py's
    WorkerClient), typed here so that neither imports the client module, which imports both."""

    package: str
    generation: int

    def request(self, op: Op, *args: Any) -> Any: ...

    def register_callback(self, fn: Callable[..., Any]) -> int: ...

    def track(self, proxy: Any, generation: int, rid: int, cell: list[int]) -> None: ...


def _client(proxy: Any) -> Peer:
    return object.__getattribute__(proxy, "_ag_client")


class Remote:
    """A reference to an object in the worker (see the module docstring)."""

    __slots__ = ("__weakref__", "_ag_client", "_ag_generation", "_ag_kind", "_ag_methods", "_ag_path", "_ag_rid",
                 "_ag_type")

    def __init__(self, client: Peer, generation: int, rid: int, kind: str, type_name: tuple[str, str],
                 methods: frozenset[str], path: str | None) -> None:
        for name, value in (("_ag_client", client), ("_ag_generation", generation), ("_ag_rid", rid),
                            ("_ag_kind", kind), ("_ag_type", type_name), ("_ag_methods", methods), ("_ag_path", path)):
            object.__setattr__(self, name, value)

    def _ag_request(self, op: Op, *args: Any) -> Any:
        return _client(self).request(op, self, *args)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name in object.__getattribute__(self, "_ag_methods"):
            return BoundMethod(self, name)
        return self._ag_request(Op.GETATTR, name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._ag_request(Op.SETATTR, name, value)

    def __delattr__(self, name: str) -> None:
        self._ag_request(Op.DELATTR, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ag_request(Op.CALL, args, kwargs)

    def _ag_special(self, name: str, *args: Any) -> Any:
        return self._ag_request(Op.SPECIAL, name, list(args))

    def __len__(self) -> int:
        n = self._ag_special("len")
        if type(n) is not int or n < 0:
            raise TypeError("the submission's __len__ returned a non-integer")
        return n

    def __getitem__(self, key: Any) -> Any:
        return self._ag_special("getitem", key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._ag_special("setitem", key, value)

    def __delitem__(self, key: Any) -> None:
        self._ag_special("delitem", key)

    def __contains__(self, item: Any) -> bool:
        return self._ag_special("contains", item) is True

    def __iter__(self) -> Any:
        items = self._ag_special("iter")
        if type(items) is not list:
            raise TypeError("the submission's iterator did not give a list of items")
        return iter(items)

    def __next__(self) -> Any:
        return self._ag_special("next")

    def __bool__(self) -> bool:
        return self._ag_special("bool") is True

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        try:
            text = self._ag_special("repr")
        except Exception:  # noqa: BLE001  a dead worker must not break pytest's report
            text = None
        module, name = object.__getattribute__(self, "_ag_type")
        return text if type(text) is str else f"<{module}.{name} in the worker>"

    def __str__(self) -> str:
        text = self._ag_special("str")
        return text if type(text) is str else repr(self)

    def __instancecheck__(self, obj: Any) -> bool:
        """`isinstance(x, RemoteClass)`: same class name in the worker (subclasses are not seen)."""
        if object.__getattribute__(self, "_ag_kind") != "class" and type(self) is not PathRef:
            raise TypeError("isinstance() arg 2 must be a class")
        target = _remote_type_name(self)
        return isinstance(obj, (Remote, Record, EnumValue)) and _instance_type_name(obj) == target


class BoundMethod:
    """`obj.method` for a method the judge knows the class has: calling it is one request."""

    __slots__ = ("_name", "_target")

    def __init__(self, target: Remote, name: str) -> None:
        self._target, self._name = target, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _client(self._target).request(Op.CALL_METHOD, self._target, self._name, args, kwargs)

    def resolve(self) -> Any:
        return _client(self._target).request(Op.GETATTR, self._target, self._name)

    def __repr__(self) -> str:
        return f"<method {self._name} of {self._target!r}>"


class PathRef(Remote):
    """A dotted name in the package, resolved by the worker at every use."""

    __slots__ = ()

    def __init__(self, client: Peer, path: str) -> None:
        super().__init__(client, -1, -1, "path", tuple(path.rsplit(".", 1)), frozenset(), path)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_ag_path')} (in the worker)>"


class ModuleProxy(types.ModuleType):
    """`import <package>` in the judge: attributes are the worker's, fetched at each access."""

    def __init__(self, name: str, client: Peer) -> None:
        super().__init__(name)
        object.__setattr__(self, "_ag_client", client)
        object.__setattr__(self, "__path__", [])

    def __getattribute__(self, name: str) -> Any:
        if name == "__dict__":  # the names live in the worker (monkeypatch must not read a local dict)
            return None
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        client = object.__getattribute__(self, "_ag_client")
        path = PathRef(client, object.__getattribute__(self, "__name__"))
        try:
            return client.request(Op.GETATTR, path, name)
        except AttributeError:
            raise
        except Exception:  # noqa: BLE001  the package does not import (yet): each use will say why
            return PathRef(client, f"{self.__name__}.{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__") and name.endswith("__"):
            object.__setattr__(self, name, value)
            return
        client = object.__getattribute__(self, "_ag_client")
        client.request(Op.SETATTR, PathRef(client, self.__name__), name, value)

    def __delattr__(self, name: str) -> None:
        client = object.__getattribute__(self, "_ag_client")
        client.request(Op.DELATTR, PathRef(client, self.__name__), name)


class Record(Remote):
    """An immutable value of the package: fields read and compared in the judge."""

    __slots__ = ("_ag_fields", "_ag_sequence")

    def __init__(self, client: Peer, generation: int, rid: int, type_name: tuple[str, str],
                 fields: dict[str, Any], sequence: bool, path: str | None) -> None:
        super().__init__(client, generation, rid, "record", type_name, frozenset(), path)
        object.__setattr__(self, "_ag_fields", fields)
        object.__setattr__(self, "_ag_sequence", sequence)

    def __getattr__(self, name: str) -> Any:
        fields = object.__getattribute__(self, "_ag_fields")
        if name in fields:
            return fields[name]
        return super().__getattr__(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of an immutable value")

    def _ag_values(self) -> tuple:
        return tuple(object.__getattribute__(self, "_ag_fields").values())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            return _instance_type_name(self) == _instance_type_name(other) and \
                object.__getattribute__(self, "_ag_fields") == object.__getattribute__(other, "_ag_fields")
        if type(other) is tuple and object.__getattribute__(self, "_ag_sequence"):
            return self._ag_values() == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash((_instance_type_name(self), self._ag_values()))

    def __iter__(self) -> Any:
        if object.__getattribute__(self, "_ag_sequence"):
            return iter(self._ag_values())
        return super().__iter__()

    def __len__(self) -> int:
        return len(self._ag_values()) if object.__getattribute__(self, "_ag_sequence") else super().__len__()

    def __getitem__(self, key: Any) -> Any:
        return self._ag_values()[key] if object.__getattribute__(self, "_ag_sequence") else super().__getitem__(key)

    def __repr__(self) -> str:
        _, name = object.__getattribute__(self, "_ag_type")
        fields = ", ".join(f"{k}={v!r}" for k, v in object.__getattribute__(self, "_ag_fields").items())
        return f"{name}({fields})"

    __str__ = __repr__


@dataclass(frozen=True)
class EnumValue:
    """An enum member of the package: equal to the same member (class and name), nothing else."""

    module: str
    qualname: str
    name: str
    value: Any

    def __repr__(self) -> str:
        return f"{self.qualname}.{self.name}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EnumValue) and (other.module, other.qualname, other.name) == \
            (self.module, self.qualname, self.name)

    def __hash__(self) -> int:
        return hash((self.module, self.qualname, self.name))


def _remote_type_name(proxy: Remote) -> str:
    if type(proxy) is PathRef:
        return object.__getattribute__(proxy, "_ag_path")
    module, name = object.__getattribute__(proxy, "_ag_type")
    return f"{module}.{name}"


def _instance_type_name(obj: Any) -> str:
    if isinstance(obj, EnumValue):
        return f"{obj.module}.{obj.qualname}"
    module, name = object.__getattribute__(obj, "_ag_type")
    return f"{module}.{name}"
