"""Op and kernel accounting rules of an assignment: shared by the spec (outside the sandbox), the
judge (which decides from a worker's ledger) and the worker (which keeps the ledger)."""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

PACKAGE_PATTERN = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass(frozen=True)
class AccountingRules:
    """What a submission may run while a graded test calls it (see autograder/worker/accounting.py).

    forbidden_ops: fnmatch patterns (case-insensitive) on dispatcher op names, e.g.
        "aten::*scaled_dot_product*"; a hit outside `oracle()` fails the test.
    require_kernels: dotted modules of the package (e.g. "flashattn"); each must launch at least
        one Triton kernel it defines during every graded test (the `kernels` mark overrides this).
    forbidden_kernels: patterns on CUDA kernel names seen in perf audits (e.g. "*fmha*"); the
        package's own Triton kernels never match.
    """

    forbidden_ops: tuple[str, ...] = ()
    require_kernels: tuple[str, ...] = ()
    forbidden_kernels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for op in self.forbidden_ops:
            if "::" not in op:
                raise ValueError(f"[accounting].forbidden_ops: {op!r} must name a namespace, e.g. 'aten::mm'")
        for module in self.require_kernels:
            if not all(PACKAGE_PATTERN.match(part) for part in module.split(".")):
                raise ValueError(f"[accounting].require_kernels: {module!r} is not a dotted module name")

    @property
    def active(self) -> bool:
        return bool(self.forbidden_ops or self.require_kernels or self.forbidden_kernels)

    def to_json(self) -> dict[str, list[str]]:
        return {"forbidden_ops": list(self.forbidden_ops), "require_kernels": list(self.require_kernels),
                "forbidden_kernels": list(self.forbidden_kernels)}

    @classmethod
    def from_json(cls, data: dict[str, list[str]]) -> AccountingRules:
        return cls(**{key: tuple(data.get(key, ())) for key in ("forbidden_ops", "require_kernels",
                                                                 "forbidden_kernels")})


def matches(name: str, patterns: tuple[str, ...]) -> str | None:
    """The first pattern (fnmatch, case-insensitive) that `name` matches, else None."""
    low = name.lower()
    return next((p for p in patterns if fnmatch.fnmatchcase(low, p.lower())), None)


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@dataclass
class Ledger:
    """What one test's submission ran. ops / device_kernels: name -> count; launches: qualified
    Triton kernel names (module.function) -> count; own_kernels: kernel name -> defining module of
    the package's Triton kernels; calls: markers the worker put down at each call it served."""

    ops: Counter = field(default_factory=Counter)
    launches: Counter = field(default_factory=Counter)
    device_kernels: Counter = field(default_factory=Counter)
    own_kernels: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"ops": dict(self.ops), "launches": dict(self.launches), "device_kernels": dict(self.device_kernels),
                "own_kernels": dict(self.own_kernels), "problems": list(self.problems)}

    @classmethod
    def from_json(cls, data: Any) -> Ledger:
        """A ledger from what a worker sent; ValueError when it is not one."""
        if not isinstance(data, dict):
            raise ValueError("the ledger is not a table")  # noqa: TRY004  (one error type for every bad ledger)

        def counts(key: str) -> Counter:
            table = data.get(key, {})
            if not isinstance(table, dict) or not all(type(k) is str and type(v) is int for k, v in table.items()):
                raise ValueError(f"the ledger's {key} are not name -> count")
            return Counter(table)

        own, problems = data.get("own_kernels", {}), data.get("problems", [])
        if not isinstance(own, dict) or not all(type(k) is str and type(v) is str for k, v in own.items()):
            raise ValueError("the ledger's own_kernels are not name -> module")
        if not isinstance(problems, list) or not all(type(p) is str for p in problems):
            raise ValueError("the ledger's problems are not strings")
        return cls(counts("ops"), counts("launches"), counts("device_kernels"), dict(own), list(problems))


def forbidden_hits(ledger: Ledger, rules: AccountingRules) -> list[str]:
    """Tampering, forbidden ops and forbidden device kernels in `ledger`."""
    reasons = list(ledger.problems)
    for op in sorted(ledger.ops):
        if pattern := matches(op, rules.forbidden_ops):
            reasons.append(f"the submission ran {op} (forbidden here: {pattern}); implement it yourself")
    for kernel in sorted(ledger.device_kernels):
        if kernel not in ledger.own_kernels and (pattern := matches(kernel, rules.forbidden_kernels)):
            reasons.append(f"the timed code ran the library kernel {kernel[:80]} (forbidden here: {pattern})")
    return reasons


def verdict(ledger: Ledger, rules: AccountingRules, required: tuple[str, ...]) -> str:
    """Why the test fails its accounting ("" when it passes)."""
    reasons = forbidden_hits(ledger, rules)
    own = ledger.own_kernels
    for module in required:
        launched = any(within(name.rsplit(".", 1)[0], module) for name in ledger.launches)
        replayed = any(within(own[k], module) for k in ledger.device_kernels if k in own)
        if not (launched or replayed):
            reasons.append(f"no Triton kernel of {module} ran: this exercise is to write it")
    return "; ".join(dict.fromkeys(reasons))
