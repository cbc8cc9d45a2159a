"""One typed request per judge -> worker operation: the fields each `Op` carries, in wire order.

On the wire a request is `(op, releases, rng, *fields)` (the codec carries plain values and
proxies); both ends build this typed form from the fields: the judge before it sends (a request
built wrong fails there, in the grader's own code), the worker before it runs anything (a message
of the wrong shape or with a name that is not a string is a ProtocolError, never an IndexError in
the middle of a call). `Request.fields()` gives the wire order back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from autograder.protocol.messages import Op
from autograder.protocol.wire import ProtocolError, expect

MEASURE_PHASES = ("warmup", "calibrate", "timed", "outputs", "replayed", "audit")


@dataclass(frozen=True)
class Request:
    op: ClassVar[Op]
    strings: ClassVar[tuple[str, ...]] = ()  # fields that must be exactly `str`

    def __post_init__(self) -> None:
        for name in self.strings:
            expect(getattr(self, name), str, f"{self.op.value} {name}")

    def fields(self) -> tuple:
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))


@dataclass(frozen=True)
class Hello(Request):
    """-> the worker's pid and generation."""
    op: ClassVar[Op] = Op.HELLO


@dataclass(frozen=True)
class BeginTest(Request):
    """A test starts: its forbidden names, accounting rules (JSON form) and required kernels."""
    op: ClassVar[Op] = Op.BEGIN_TEST
    strings: ClassVar[tuple[str, ...]] = ("nodeid",)
    nodeid: str
    forbidden: list
    rules: dict
    required: list


@dataclass(frozen=True)
class EndTest(Request):
    """-> the test's ledger."""
    op: ClassVar[Op] = Op.END_TEST


@dataclass(frozen=True)
class GetAttr(Request):
    op: ClassVar[Op] = Op.GETATTR
    strings: ClassVar[tuple[str, ...]] = ("name",)
    target: Any
    name: str


@dataclass(frozen=True)
class SetAttr(Request):
    op: ClassVar[Op] = Op.SETATTR
    strings: ClassVar[tuple[str, ...]] = ("name",)
    target: Any
    name: str
    value: Any


@dataclass(frozen=True)
class DelAttr(Request):
    op: ClassVar[Op] = Op.DELATTR
    strings: ClassVar[tuple[str, ...]] = ("name",)
    target: Any
    name: str


@dataclass(frozen=True)
class Call(Request):
    op: ClassVar[Op] = Op.CALL
    target: Any
    args: Sequence
    kwargs: dict


@dataclass(frozen=True)
class CallMethod(Request):
    """obj.method(...) in one round trip."""
    op: ClassVar[Op] = Op.CALL_METHOD
    strings: ClassVar[tuple[str, ...]] = ("name",)
    target: Any
    name: str
    args: Sequence
    kwargs: dict


@dataclass(frozen=True)
class Special(Request):
    """A dunder the proxy forwards (len, getitem, iter, bool, repr, ...)."""
    op: ClassVar[Op] = Op.SPECIAL
    strings: ClassVar[tuple[str, ...]] = ("name",)
    target: Any
    name: str
    args: Sequence


@dataclass(frozen=True)
class Shipped(Request):
    """Test-side code run in the worker: the test module's file and name, the function's qualname;
    `source` is the module's text, sent with a worker's first call of it."""
    op: ClassVar[Op] = Op.SHIPPED
    strings: ClassVar[tuple[str, ...]] = ("path", "module", "qualname")
    path: str
    module: str
    qualname: str
    args: Sequence
    kwargs: dict
    source: str | None = None


@dataclass(frozen=True)
class Measure(Request):
    """One phase of a timed measurement of `target` (judge/bracket.py)."""
    op: ClassVar[Op] = Op.MEASURE
    strings: ClassVar[tuple[str, ...]] = ("phase",)
    target: Any
    phase: str
    options: dict

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.phase not in MEASURE_PHASES:
            raise ProtocolError(f"measure: unknown phase {self.phase!r}")
        expect(self.options, dict, "measure options")


REQUESTS: dict[Op, type[Request]] = {cls.op: cls for cls in (Hello, BeginTest, EndTest, GetAttr, SetAttr, DelAttr,
                                                             Call, CallMethod, Special, Shipped, Measure)}


def parse(op: Op, fields: Sequence) -> Request:
    """The typed request of `op` from its wire fields; ProtocolError for an op that is not a request,
    too few or too many fields, or a field of the wrong type."""
    cls = REQUESTS.get(op)
    if cls is None:
        raise ProtocolError(f"unknown request {op}")
    spec = dataclasses.fields(cls)
    required = sum(f.default is dataclasses.MISSING for f in spec)
    if not required <= len(fields) <= len(spec):
        raise ProtocolError(f"{op.value}: {len(fields)} fields, expected {required}"
                            + (f" to {len(spec)}" if len(spec) != required else ""))
    return cls(*fields)
