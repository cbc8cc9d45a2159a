"""The assignment spec: `solutions/<id>/assignment.toml` read into validated dataclasses."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.errors import GraderError
from autograder.host.spec_parts import ID_PATTERN, Given, Limits, PerfMetric, Threshold, Tolerance, Written
from autograder.host.spec_schema import check_shape
from autograder.protocol.rules import PACKAGE_PATTERN, AccountingRules



@dataclass(frozen=True)
class AssignmentSpec:
    id: str
    title: str
    stage: int
    package: str
    editable: tuple[str, ...]
    limits: Limits = field(default_factory=Limits)
    perf: dict[str, PerfMetric] = field(default_factory=dict)
    accounting: AccountingRules = field(default_factory=AccountingRules)
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    written: tuple[Written, ...] = ()
    given: tuple[Given, ...] = ()

    def __post_init__(self) -> None:
        if not ID_PATTERN.match(self.id):
            raise ValueError(f"id {self.id!r} must look like 'sNN_topic' (stage) or 'pN_topic' (capstone)")
        if not 0 <= self.stage <= 15:
            raise ValueError(f"stage {self.stage} must be between 0 and 15")
        if not PACKAGE_PATTERN.match(self.package):
            raise ValueError(f"package {self.package!r} is not a valid Python package name")
        if not self.editable:
            raise ValueError("editable must list at least one glob (the files a student may change)")
        for pattern in self.editable:
            if pattern.startswith("/") or ".." in Path(pattern).parts:
                raise ValueError(f"editable glob {pattern!r} must stay inside the assignment directory")
        ids = [w.id for w in self.written]
        if len(set(ids)) != len(ids):
            raise ValueError(f"[[written]]: ids must be unique, got {ids}")
        given = [g.package for g in self.given if g.package]
        if self.package in given or len(set(given)) != len(given):
            raise ValueError(f"[[given]] packages {given} must differ from each other and from {self.package!r}")
        for module in self.accounting.require_kernels:
            if module.split(".")[0] != self.package:
                raise ValueError(f"[accounting].require_kernels: {module!r} is not inside package {self.package!r}")

    @property
    def packages(self) -> tuple[str, ...]:
        """The graded package first, then the given packages beside it (all staged as the student's code)."""
        return (self.package, *(g.package for g in self.given if g.package))

    @property
    def given_packages(self) -> tuple[Given, ...]:
        return tuple(g for g in self.given if g.package)

    @property
    def task_prefix(self) -> str:
        """'s01' for 's01_transformer': the prefix of every task id in the stubs."""
        return self.id.split("_", 1)[0]


def _expect(table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in table:
        raise ValueError(f"{where}: missing key {key!r}")
    value = table[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ValueError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _parse_perf(name: str, table: dict[str, Any]) -> PerfMetric:
    where = f"[perf.{name}]"
    better = table.get("better", "higher")
    if better not in ("higher", "lower"):
        raise ValueError(f"{where}.better must be 'higher' or 'lower', got {better!r}")
    thresholds = {}
    for tag, bars in table.get("thresholds", {}).items():
        if not isinstance(bars, dict) or {"pass", "full", "env"} - bars.keys():
            raise ValueError(f'{where}.thresholds.{tag} must be {{ pass = x, full = y, env = "<environment>" }}')
        lo, hi = float(bars["pass"]), float(bars["full"])
        if (better == "higher" and hi < lo) or (better == "lower" and hi > lo):
            raise ValueError(f"{where}.thresholds.{tag}: the full bar {hi} is easier than the pass bar {lo}")
        thresholds[tag] = Threshold(lo, hi, str(bars["env"]))
    return PerfMetric(
        name=name,
        description=str(table.get("description", "")),
        unit=str(table.get("unit", "")),
        higher_is_better=better == "higher",
        thresholds=thresholds,
    )


def _parse_accounting(table: dict[str, Any]) -> AccountingRules:
    lists = ("forbidden_ops", "require_kernels", "forbidden_kernels")
    for key in lists:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"[accounting].{key}: expected a list of non-empty strings, got {value!r}")
    compute = table.get("compute_in_kernels", False)
    if not isinstance(compute, bool):
        raise ValueError(f"[accounting].compute_in_kernels: expected true or false, got {compute!r}")
    allow = table.get("allow_ops", {})
    if not isinstance(allow, dict) or not all(isinstance(v, str) for v in allow.values()):
        raise ValueError('[accounting.allow_ops]: expected a table of op pattern = "the reason it runs outside '
                         f'the kernels", got {allow!r}')
    share = table.get("min_kernel_share", 0.9)
    if not isinstance(share, (int, float)) or isinstance(share, bool):
        raise ValueError(f"[accounting].min_kernel_share: expected a number in [0, 1], got {share!r}")
    return AccountingRules(**{key: tuple(table.get(key, ())) for key in lists}, compute_in_kernels=compute,
                           allow_ops=tuple(allow.items()), min_kernel_share=float(share))


def parse_tolerances(table: dict[str, Any]) -> dict[str, Tolerance]:
    """[tolerances]: "what is compared" = { rtol = x, atol = y, note = "why" }."""
    tolerances = {}
    for name, entry in table.items():
        where = f"[tolerances] {name!r}"
        if not isinstance(entry, dict) or {"rtol", "atol"} - entry.keys() or entry.keys() - {"rtol", "atol", "note"}:
            raise ValueError(f'{where}: expected {{ rtol = x, atol = y, note = "why" }} (note optional), got {entry!r}')
        rtol, atol = (_expect(entry, key, (int, float), where) for key in ("rtol", "atol"))
        try:
            tolerances[name] = Tolerance(float(rtol), float(atol), str(entry.get("note", "")))
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    return tolerances


def _parse_written(entries: Any) -> tuple[Written, ...]:
    """[[written]]: id, points, question; the answer file is answers/<id>.md."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError("[[written]] must be an array of tables (one [[written]] per question)")
    out = []
    for entry in entries:
        where = f"[[written]] {entry.get('id', '?')!r}"
        wid = _expect(entry, "id", str, where)
        out.append(Written(wid, float(_expect(entry, "points", (int, float), where)),
                           _expect(entry, "question", str, where)))
    return tuple(out)


def _parse_given(entries: Any) -> tuple[Given, ...]:
    """[[given]]: file or package, solves (the assignment whose exercise it answers), note."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError("[[given]] must be an array of tables (one [[given]] per file or package)")
    out = []
    for entry in entries:
        where = f"[[given]] {entry.get('file', entry.get('package', '?'))!r}"
        for key in ("file", "package", "note"):
            if not isinstance(entry.get(key, ""), str):
                raise ValueError(f"{where}.{key}: expected str, got {entry[key]!r}")  # noqa: TRY004 (one error type for the spec)
        out.append(Given(file=entry.get("file", ""), package=entry.get("package", ""),
                         solves=_expect(entry, "solves", str, where), note=entry.get("note", "")))
    return tuple(out)


def parse_spec(data: dict[str, Any]) -> AssignmentSpec:
    """Build a spec from a parsed TOML document; raise ValueError naming the bad key."""
    check_shape(data)  # unknown tables and keys, types, hardware tags: with the nearest valid name
    head = data.get("assignment")
    if not isinstance(head, dict):
        raise ValueError("missing [assignment] table")
    limits_table = data.get("limits", {})
    limits = Limits(
        test_timeout_s=float(limits_table.get("test_timeout_s", Limits.test_timeout_s)),
        file_timeout_s=float(limits_table.get("file_timeout_s", Limits.file_timeout_s)),
        memory_mb=int(limits_table.get("memory_mb", Limits.memory_mb)),
        forbidden=tuple(limits_table.get("forbidden", ())),
    )
    perf = {name: _parse_perf(name, table) for name, table in data.get("perf", {}).items()}
    accounting = _parse_accounting(data.get("accounting", {}))
    return AssignmentSpec(
        id=_expect(head, "id", str, "[assignment]"),
        title=_expect(head, "title", str, "[assignment]"),
        stage=_expect(head, "stage", int, "[assignment]"),
        package=_expect(head, "package", str, "[assignment]"),
        editable=tuple(_expect(head, "editable", list, "[assignment]")),
        limits=limits,
        perf=perf,
        accounting=accounting,
        tolerances=parse_tolerances(data.get("tolerances", {})),
        written=_parse_written(data.get("written", [])),
        given=_parse_given(data.get("given", [])),
    )


def load_spec(path: Path) -> AssignmentSpec:
    """Read and validate an assignment.toml; GraderError with the file name on any problem."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise GraderError(f"{path}: no assignment.toml here") from None
    except tomllib.TOMLDecodeError as e:
        raise GraderError(f"{path}: malformed TOML: {e}") from None
    try:
        spec = parse_spec(data)
    except (ValueError, TypeError) as e:
        raise GraderError(f"{path}: {e}") from None
    if spec.id != path.parent.name:
        raise GraderError(f"{path}: id {spec.id!r} differs from its folder name {path.parent.name!r}")
    return spec
