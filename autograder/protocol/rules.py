"""Op and kernel accounting rules of an assignment: shared by the spec (outside the sandbox), the
judge (which decides from a worker's ledger) and the worker (which keeps the ledger)."""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

PACKAGE_PATTERN = re.compile(r"^[a-z_][a-z0-9_]*$")
DISPATCHER_OP = re.compile(r"^[a-z_][a-z0-9_]*::[A-Za-z0-9_.]+$")  # "aten::mul.Tensor"; not "autograd::engine::..."

# What a kernel exercise may run outside its own Triton kernels (fnmatch, case-insensitive):
# allocation, views and reshapes, copies and `contiguous`, dtype casts, metadata. Everything else
# computes (arithmetic, reductions, comparisons, computed indexing) and belongs inside a kernel.
# A denylist could never be complete: torch has hundreds of ops that compose into a norm.
KERNEL_EXERCISE_OPS = (
    # allocation (a constant fill is allocation too)
    "aten::empty", "aten::empty.*", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
    "aten::new_empty_strided", "aten::zeros", "aten::zeros_like", "aten::new_zeros", "aten::ones",
    "aten::ones_like", "aten::new_ones", "aten::full", "aten::full_like", "aten::new_full", "aten::zero_",
    "aten::fill_", "aten::resize_", "aten::lift_fresh", "aten::scalar_tensor",
    # views and reshapes
    "aten::view", "aten::view_as", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias",
    "aten::as_strided", "aten::as_strided_", "aten::alias", "aten::detach", "aten::detach_", "aten::transpose",
    "aten::transpose_", "aten::t", "aten::permute", "aten::expand", "aten::expand_as", "aten::squeeze",
    "aten::squeeze_", "aten::unsqueeze", "aten::unsqueeze_", "aten::flatten", "aten::unflatten", "aten::select",
    "aten::slice", "aten::narrow", "aten::split", "aten::split_with_sizes", "aten::chunk", "aten::unbind",
    "aten::movedim", "aten::swapaxes", "aten::unfold", "aten::view_as_real", "aten::view_as_complex",
    "aten::set_", "aten::_nested_tensor_from_mask",
    # copies and casts
    "aten::contiguous", "aten::clone", "aten::copy_", "aten::to", "aten::_to_copy", "aten::type_as",
    "aten::_has_compatible_shallow_copy_type",
    # metadata
    "aten::size", "aten::sym_size", "aten::stride", "aten::sym_stride", "aten::numel", "aten::sym_numel",
    "aten::dim", "aten::is_contiguous", "aten::is_same_size", "aten::result_type", "aten::is_floating_point",
    "aten::is_complex", "aten::storage_offset", "aten::sym_storage_offset", "aten::record_stream",
    # one scalar read for a launch configuration (capped per call: see SCALAR_READS_PER_CALL)
    "aten::_local_scalar_dense", "aten::item",
)
SCALAR_READ_OPS = ("aten::_local_scalar_dense",)
SCALAR_READS_PER_CALL = 16  # a grid size or a max length; a loop over elements reads thousands


@dataclass(frozen=True)
class AccountingRules:
    """What a submission may run while a graded test calls it (see autograder/worker/accounting.py).

    forbidden_ops: fnmatch patterns (case-insensitive) on dispatcher op names, e.g.
        "aten::*scaled_dot_product*"; a hit outside `oracle()` fails the test.
    require_kernels: dotted modules of the package (e.g. "flashattn"); each must launch at least
        one Triton kernel it defines during every graded test (the `kernels` mark overrides this).
    forbidden_kernels: patterns on CUDA kernel names seen in perf audits (e.g. "*fmha*"); the
        package's own Triton kernels never match.
    compute_in_kernels: a kernel exercise: while a test that requires the package's kernels calls
        it, every dispatcher op outside a launch of the package's own kernels must be on
        KERNEL_EXERCISE_OPS or `allow_ops`.
    allow_ops: (pattern, reason) pairs an assignment adds to KERNEL_EXERCISE_OPS, each with the
        reason it must run outside the kernels.
    min_kernel_share: in a kernel exercise on CUDA, the least share of the GPU time of a perf
        audit's call that the package's own kernels must take (a decoy kernel beside library
        kernels takes almost none).
    """

    forbidden_ops: tuple[str, ...] = ()
    require_kernels: tuple[str, ...] = ()
    forbidden_kernels: tuple[str, ...] = ()
    compute_in_kernels: bool = False
    allow_ops: tuple[tuple[str, str], ...] = ()
    min_kernel_share: float = 0.9

    def __post_init__(self) -> None:
        for op in self.forbidden_ops:
            if "::" not in op:
                raise ValueError(f"[accounting].forbidden_ops: {op!r} must name a namespace, e.g. 'aten::mm'")
        for module in self.require_kernels:
            if not all(PACKAGE_PATTERN.match(part) for part in module.split(".")):
                raise ValueError(f"[accounting].require_kernels: {module!r} is not a dotted module name")
        for op, reason in self.allow_ops:
            if "::" not in op or not reason.strip():
                raise ValueError(f"[accounting.allow_ops]: {op!r} must name a namespace ('aten::cumsum') "
                                 "and give the reason it runs outside the kernels")
        if not 0.0 <= self.min_kernel_share <= 1.0:
            raise ValueError(f"[accounting].min_kernel_share: {self.min_kernel_share} is not a share in [0, 1]")
        if self.compute_in_kernels and not self.require_kernels:
            raise ValueError("[accounting].compute_in_kernels needs require_kernels: the modules whose kernels compute")

    @property
    def active(self) -> bool:
        return bool(self.forbidden_ops or self.require_kernels or self.forbidden_kernels)

    @property
    def records_ops(self) -> bool:
        """Whether the worker records dispatcher ops (a profiler session) during each test."""
        return bool(self.forbidden_ops) or self.compute_in_kernels

    @property
    def allowed_ops(self) -> tuple[str, ...]:
        return KERNEL_EXERCISE_OPS + tuple(op for op, _ in self.allow_ops)

    def to_json(self) -> dict[str, Any]:
        return {"forbidden_ops": list(self.forbidden_ops), "require_kernels": list(self.require_kernels),
                "forbidden_kernels": list(self.forbidden_kernels), "compute_in_kernels": self.compute_in_kernels,
                "allow_ops": [list(pair) for pair in self.allow_ops], "min_kernel_share": self.min_kernel_share}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AccountingRules:
        lists = {key: tuple(data.get(key, ())) for key in ("forbidden_ops", "require_kernels", "forbidden_kernels")}
        return cls(**lists, compute_in_kernels=bool(data.get("compute_in_kernels", False)),
                   allow_ops=tuple((str(op), str(why)) for op, why in data.get("allow_ops", ())),
                   min_kernel_share=float(data.get("min_kernel_share", 0.9)))


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
    the package's Triton kernels; outside_ops: the dispatcher ops that ran outside the package's
    kernels, i.e. all of them (no launch is exempt; kept for kernel exercises); sites: op short name -> "file:line" of the
    package's code that called it (best effort, for the reason shown to the student)."""

    ops: Counter = field(default_factory=Counter)
    launches: Counter = field(default_factory=Counter)
    device_kernels: Counter = field(default_factory=Counter)
    own_kernels: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    outside_ops: Counter = field(default_factory=Counter)
    sites: dict[str, str] = field(default_factory=dict)
    device_ns: Counter = field(default_factory=Counter)  # GPU nanoseconds per kernel name in perf audits

    def to_json(self) -> dict[str, Any]:
        return {"ops": dict(self.ops), "launches": dict(self.launches), "device_kernels": dict(self.device_kernels),
                "own_kernels": dict(self.own_kernels), "problems": list(self.problems),
                "outside_ops": dict(self.outside_ops), "sites": dict(self.sites), "device_ns": dict(self.device_ns)}

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

        def names(key: str) -> dict[str, str]:
            table = data.get(key, {})
            if not isinstance(table, dict) or not all(type(k) is str and type(v) is str for k, v in table.items()):
                raise ValueError(f"the ledger's {key} are not name -> text")
            return dict(table)

        problems = data.get("problems", [])
        if not isinstance(problems, list) or not all(type(p) is str for p in problems):
            raise ValueError("the ledger's problems are not strings")
        return cls(counts("ops"), counts("launches"), counts("device_kernels"), names("own_kernels"), list(problems),
                   counts("outside_ops"), names("sites"), counts("device_ns"))


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


def own_kernel_share(ledger: Ledger) -> float | None:
    """The share of the audited calls' GPU time spent in the package's own kernels (None: no
    audit on a GPU)."""
    total = sum(ledger.device_ns.values())
    if total <= 0:
        return None
    return sum(ns for name, ns in ledger.device_ns.items() if name in ledger.own_kernels) / total


def outside_kernel_hits(ledger: Ledger, rules: AccountingRules, calls: int) -> list[str]:
    """Ops a kernel exercise ran outside its kernels that are not on the allowlist."""
    reasons = []
    for op, count in sorted(ledger.outside_ops.items()):
        if op in ("aten::resolve_conj", "aten::resolve_neg"):  # what .numpy(), .tolist() and np.asarray run
            reasons.append(f"a tensor left torch ({op}: .numpy(), .tolist() or np.asarray) outside the package's "
                           "kernels; in this exercise the computing stays in its own Triton kernels")
        elif matches(op, rules.allowed_ops) is None:
            short = op.split("::", 1)[1].split(".", 1)[0]
            site = ledger.sites.get(short) or ledger.sites.get(short.strip("_"))
            where = f" (called at {site})" if site else ""
            reasons.append(f"the submission computed with {op}{where} outside its own Triton kernels; in this "
                           "exercise only allocation, views, copies and casts may run outside them")
        elif matches(op, SCALAR_READ_OPS) and count > SCALAR_READS_PER_CALL * max(1, calls):
            reasons.append(f"the submission read {count} scalars off the device in {max(1, calls)} call(s) "
                           f"(at most {SCALAR_READS_PER_CALL} per call: a launch configuration, not elements)")
    share = own_kernel_share(ledger)
    if share is not None and share < rules.min_kernel_share:
        reasons.append(f"the package's own kernels took {share:.0%} of the GPU time of the audited call (at least "
                       f"{rules.min_kernel_share:.0%} in this exercise): the rest ran in library kernels")
    return reasons


def verdict(ledger: Ledger, rules: AccountingRules, required: tuple[str, ...], calls: int = 1) -> str:
    """Why the test fails its accounting ("" when it passes). `calls`: the judge's count of calls
    into the submission during the test."""
    reasons = forbidden_hits(ledger, rules)
    if rules.compute_in_kernels and required:
        reasons += outside_kernel_hits(ledger, rules, calls)
    own = ledger.own_kernels
    for module in required:
        launched = any(within(name.rsplit(".", 1)[0], module) for name in ledger.launches)
        replayed = any(within(own[k], module) for k in ledger.device_kernels if k in own)
        if not (launched or replayed):
            reasons.append(f"no Triton kernel of {module} ran: this exercise is to write it")
    return "; ".join(dict.fromkeys(reasons))
