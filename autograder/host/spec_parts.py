"""The parts of an assignment spec (solutions/<id>/assignment.toml): perf bars and metrics,
numerical tolerances, written questions, given packages and limits, each validated on
construction. The spec itself, and the parsing of the TOML into these, is host/spec.py's."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from autograder.protocol.rules import PACKAGE_PATTERN

ID_PATTERN = re.compile(r"^(s\d{2}|p\d)_[a-z0-9_]+$")  # an assignment id: s07_training, p2_tpp


@dataclass(frozen=True)
class Threshold:
    """Bars for one metric on one hardware tag. Reaching `pass_bar` earns half, `full_bar` all."""

    pass_bar: float
    full_bar: float
    env: str = ""  # the environment of course/versions.toml it was measured in

    def fraction(self, value: float, higher_is_better: bool) -> float:
        """Credit in [0, 1]: 0 below the pass bar, 0.5 at it, linear up to 1 at the full bar."""
        if value != value:  # NaN never earns credit
            return 0.0
        sign = 1.0 if higher_is_better else -1.0
        v, lo, hi = sign * value, sign * self.pass_bar, sign * self.full_bar
        if v < lo:
            return 0.0
        if hi <= lo or v >= hi:
            return 1.0
        return 0.5 + 0.5 * (v - lo) / (hi - lo)


@dataclass(frozen=True)
class PerfMetric:
    name: str
    description: str
    unit: str
    higher_is_better: bool
    thresholds: dict[str, Threshold] = field(default_factory=dict)


@dataclass(frozen=True)
class Tolerance:
    """One entry of the numerical contract: a test compares with
    `torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)`, i.e. elementwise
    |actual - expected| <= atol + rtol * |expected|. `note` says why it is this loose or tight."""

    rtol: float
    atol: float
    note: str = ""

    def __post_init__(self) -> None:
        for name, value in (("rtol", self.rtol), ("atol", self.atol)):
            if not 0.0 <= value < float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    def kwargs(self) -> dict[str, float]:
        """The keyword arguments of torch.testing.assert_close."""
        return {"rtol": self.rtol, "atol": self.atol}


@dataclass(frozen=True)
class Written:
    """A free-text question graded by an instructor against a rubric (solutions/<id>/rubrics/).
    The student writes `answer` (answers/<id>.md, shipped with the question); until an instructor
    grades it, its points are pending and in no automatic total."""

    id: str
    points: float
    question: str

    @property
    def answer(self) -> str:
        """The answer file, relative to the assignment folder."""
        return f"answers/{self.id}.md"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.id):
            raise ValueError(f"[[written]] id {self.id!r}: use lowercase letters, digits and _")
        if not self.points > 0:
            raise ValueError(f"[[written]] {self.id}: points must be > 0, got {self.points}")
        if not self.question.strip():
            raise ValueError(f"[[written]] {self.id}: the question is empty")


@dataclass(frozen=True)
class Given:
    """Code shipped complete that answers an earlier assignment's exercise (`solves`): it may reach
    students only in releases after that assignment's due date (checked against the schedule).

    Either one `file` of this assignment's own tree, or a whole `package` of an earlier assignment:
    that assignment's reference package (the one `solves` grades), shipped beside this one's package
    and never copied into this assignment's solution folder (one source of truth). A student may
    carry their own version of a given package in instead; it is not graded here.
    """

    file: str = ""
    solves: str = ""
    note: str = ""
    package: str = ""

    def __post_init__(self) -> None:
        if bool(self.file) == bool(self.package):
            raise ValueError(f"[[given]] {self.name!r}: set exactly one of `file` and `package`")
        if self.file and (self.file.startswith("/") or ".." in Path(self.file).parts or not self.file.endswith(".py")):
            raise ValueError(f"[[given]] file {self.file!r}: a .py file inside the assignment folder")
        if self.package and not PACKAGE_PATTERN.match(self.package):
            raise ValueError(f"[[given]] package {self.package!r} is not a valid Python package name")
        if not ID_PATTERN.match(self.solves):
            raise ValueError(f"[[given]] {self.name}: solves {self.solves!r} is not an assignment id")

    @property
    def name(self) -> str:
        """The file, or the package folder (with a trailing slash), as messages name it."""
        return self.file or f"{self.package}/"


@dataclass(frozen=True)
class Limits:
    test_timeout_s: float = 120.0
    file_timeout_s: float = 900.0
    memory_mb: int = 6144
    forbidden: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.test_timeout_s <= 0 or self.file_timeout_s <= 0:
            raise ValueError("limits: timeouts must be positive seconds")
        if self.file_timeout_s < self.test_timeout_s:
            raise ValueError("limits: file_timeout_s must be at least test_timeout_s")
        if self.memory_mb < 256:
            raise ValueError(f"limits: memory_mb={self.memory_mb} is below 256 MiB; Python alone needs more")
