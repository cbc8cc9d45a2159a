"""Plain data for grading outcomes: one `TestResult` per expected test, one `AssignmentResult`."""

from __future__ import annotations

from dataclasses import dataclass, field

from autograder.protocol.messages import Status

# The one status vocabulary, as the plain strings records and reports carry. MANUAL: a written
# answer an instructor grades later (its points are pending, in no automatic total). HELD: a test
# whose pass rests on evidence the submission could write (the judge said so, or the tamper scan
# flagged the package): its points wait for an instructor's review, in no automatic total either.
PASSED, FAILED, ERROR, NOT_GRADED, HELD = (
    s.value for s in (Status.PASSED, Status.FAILED, Status.ERROR, Status.NOT_GRADED, Status.HELD))
MANUAL = "manual"


@dataclass
class ExpectedTest:
    """What the trusted side expects from its own copy of the tests."""

    __test__ = False

    nodeid: str
    file: str
    points: float
    gpu: bool
    perf: bool
    world_size: int = 1  # ranks a multi-rank test starts (besides the test's own worker)

    @property
    def hidden(self) -> bool:
        return self.file.startswith("hidden/")


@dataclass
class Attachment:
    """A PNG a test attached (`perf.attach`): its signed name and digest, then what the trusted side
    made of the judge's file: its verified bytes, or the problem that kept it out of the results."""

    name: str
    sha256: str
    file: str                                    # the judge's file name in the run's attachments folder
    data: bytes | None = field(default=None, repr=False)  # set once the bytes hash to `sha256`
    path: str = ""                               # where the report saved it ("" until saved)
    problem: str = ""                            # why it was not kept ("" when it was)


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class

    test: ExpectedTest
    status: str
    reason: str = ""
    output: str = ""
    duration_s: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    perf_notes: list[str] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    held_score: float = 0.0  # HELD: what an instructor's release awards (`autograder review`)

    @property
    def graded(self) -> bool:
        """Scored by this run (a pending written answer, a held test and a test for other hardware are not)."""
        return self.status not in (NOT_GRADED, MANUAL, HELD)

    @property
    def max_score(self) -> float:
        return self.test.points if self.graded else 0.0


@dataclass
class AssignmentResult:
    id: str
    title: str
    hardware: str
    sandbox: str
    source: str                       # "student", "solution" or a submission path
    tests: list[TestResult] = field(default_factory=list)
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    hidden_available: bool = True     # False for a student release (no hidden tests to run)

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests)

    @property
    def possible(self) -> float:
        """The points this machine can grade: pending written answers and held tests included, so a
        total's denominator does not move when an answer is filled in or a test is held."""
        return sum(t.test.points for t in self.tests if t.status != NOT_GRADED)

    @property
    def not_graded(self) -> list[TestResult]:
        """Tests this machine could not grade (they need other hardware)."""
        return [t for t in self.tests if t.status == NOT_GRADED]

    @property
    def pending(self) -> list[TestResult]:
        """Written answers waiting for an instructor (their points are in no automatic total)."""
        return [t for t in self.tests if t.status == MANUAL]

    @property
    def held(self) -> list[TestResult]:
        """Tests held for an instructor's review (their points are in no automatic total)."""
        return [t for t in self.tests if t.status == HELD]
