"""The gradebook: one SQLite file that is the record of a class's grades.

A grade is keyed on (student, assignment, submission hash, grader version) and written in one
transaction, with its per-test outcomes, only after its grading finished: a grading that was
interrupted or crashed leaves no row, and a rerun grades exactly the submissions without one.
For each (student, assignment) one row is `current`: the latest submission seen. Rows that are not
grades (a broken archive, an ambiguous layout, no package) have a status saying so and no score.
Points an instructor gives for a written answer are kept apart (`manual_points`), keyed on the
submission they were given for; until then those points are pending. Each outcome keeps its test's
status: a `held` test (the judge or the tamper scan held it for an instructor's review) earned
nothing and is in no automatic total, like a pending answer; `held_outcomes` lists them, with what
each would earn (`held_score`) and why it was held. An instructor's release or denial of one is kept
apart too (`reviews`, see reviews.py), keyed on the submission like written-answer points.
Schema 2 added `outcomes.held_score`/`reason` and `reviews`; a schema-1 file is migrated on opening.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from autograder.host.results import HELD, MANUAL, TestResult

GRADED = "graded"
SCHEMA_VERSION = "2"
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS grades (
    id INTEGER PRIMARY KEY,
    student TEXT NOT NULL, assignment TEXT NOT NULL,
    submission_hash TEXT NOT NULL, grader_version TEXT NOT NULL,
    status TEXT NOT NULL,                  -- 'graded', or why the submission was not graded
    score REAL, max_score REAL,            -- automatic points (NULL unless graded)
    results_path TEXT, hardware TEXT, note TEXT NOT NULL DEFAULT '',
    submitted_at TEXT, graded_at TEXT NOT NULL,
    late_days INTEGER NOT NULL DEFAULT 0, penalty REAL NOT NULL DEFAULT 0, late_note TEXT NOT NULL DEFAULT '',
    current INTEGER NOT NULL DEFAULT 1,
    UNIQUE (student, assignment, submission_hash, grader_version)
);
CREATE TABLE IF NOT EXISTS outcomes (
    grade_id INTEGER NOT NULL REFERENCES grades(id) ON DELETE CASCADE,
    nodeid TEXT NOT NULL, status TEXT NOT NULL, score REAL NOT NULL, points REAL NOT NULL,
    held_score REAL, reason TEXT NOT NULL DEFAULT '',  -- a held test: what a release awards (NULL: unknown), why
    PRIMARY KEY (grade_id, nodeid)
);
CREATE TABLE IF NOT EXISTS manual_points (
    student TEXT NOT NULL, assignment TEXT NOT NULL, submission_hash TEXT NOT NULL, question TEXT NOT NULL,
    points REAL NOT NULL, max_points REAL NOT NULL, comment TEXT NOT NULL DEFAULT '', graded_at TEXT NOT NULL,
    PRIMARY KEY (student, assignment, submission_hash, question)
);
CREATE TABLE IF NOT EXISTS reviews (  -- append-only: a test's latest row is the decision, all rows the audit trail
    id INTEGER PRIMARY KEY,
    student TEXT NOT NULL, assignment TEXT NOT NULL, submission_hash TEXT NOT NULL, nodeid TEXT NOT NULL,
    released INTEGER NOT NULL, points REAL NOT NULL, max_points REAL NOT NULL,
    reviewer TEXT NOT NULL, comment TEXT NOT NULL DEFAULT '', reviewed_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reviews_by_submission ON reviews (student, assignment, submission_hash);
"""
# What each older schema needs to read as SCHEMA_VERSION (new tables come from SCHEMA itself).
MIGRATIONS = {
    "1": ("ALTER TABLE outcomes ADD COLUMN held_score REAL",
          "ALTER TABLE outcomes ADD COLUMN reason TEXT NOT NULL DEFAULT ''"),
}


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class GradeKey:
    student: str
    assignment: str
    submission_hash: str
    grader_version: str


@dataclass(frozen=True)
class Outcome:
    nodeid: str
    status: str
    score: float
    points: float
    held_score: float | None = None  # HELD: what a release awards (None: not recorded, a schema-1 grading)
    reason: str = ""                 # HELD: why the judge or the tamper scan held it

    @classmethod
    def of(cls, t: TestResult) -> Self:
        """The outcome of one test of a grading."""
        if t.status != HELD:
            return cls(t.test.nodeid, t.status, round(t.score, 4), t.test.points)
        return cls(t.test.nodeid, t.status, round(t.score, 4), t.test.points, round(t.held_score, 4), t.reason[:2000])


@dataclass(frozen=True)
class Late:
    """The lateness columns of a row (see late.Lateness)."""

    submitted_at: str | None = None
    days: int = 0
    penalty: float = 0.0
    note: str = ""


@dataclass
class GradeRecord:
    key: GradeKey
    status: str
    score: float | None = None
    max_score: float | None = None
    results_path: str | None = None
    hardware: str | None = None
    note: str = ""
    late: Late = field(default_factory=Late)
    outcomes: list[Outcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        if (self.status == GRADED) != (self.score is not None):
            raise ValueError(f"{self.key.student}: a row has a score exactly when its status is {GRADED!r}")


class Gradebook:
    """The gradebook at `path` (created on first use). One writer at a time: grade-class holds a
    lock on its output folder; readers may look at any moment (WAL journal)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")  # a committed grade survives a power cut, not just a kill
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(SCHEMA)
        version = self.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if version is None:
            self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        elif version[0] in MIGRATIONS:
            self._migrate(version[0])
        elif version[0] != SCHEMA_VERSION:
            raise ValueError(f"{path}: gradebook schema {version[0]}, this grader reads {SCHEMA_VERSION}")

    def _migrate(self, version: str) -> None:
        """Bring a file of an older schema to SCHEMA_VERSION, in one transaction (a crash leaves it old)."""
        with self.transaction():
            if self.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] != version:
                return  # another process migrated it first
            for statement in MIGRATIONS[version]:
                self.db.execute(statement)
            self.db.execute("UPDATE meta SET value=? WHERE key='schema'", (SCHEMA_VERSION,))

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def has_grade(self, key: GradeKey) -> bool:
        row = self.db.execute("SELECT 1 FROM grades WHERE student=? AND assignment=? AND submission_hash=? "
                              "AND grader_version=? AND status=?", (*_key(key), GRADED)).fetchone()
        return row is not None

    def record(self, rec: GradeRecord) -> int:
        """Write `rec` and its outcomes in one transaction (replacing a row with the same key) and
        make it the current row of its student and assignment. Returns the row id."""
        late = rec.late
        values = (rec.status, rec.score, rec.max_score, rec.results_path, rec.hardware, rec.note,
                  late.submitted_at, now(), late.days, late.penalty, late.note)
        with self.transaction():
            self.db.execute(
                "INSERT INTO grades (student, assignment, submission_hash, grader_version, status, score, max_score,"
                " results_path, hardware, note, submitted_at, graded_at, late_days, penalty, late_note)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (student, assignment, submission_hash, grader_version) DO UPDATE SET"
                " status=excluded.status, score=excluded.score, max_score=excluded.max_score,"
                " results_path=excluded.results_path, hardware=excluded.hardware, note=excluded.note,"
                " submitted_at=excluded.submitted_at, graded_at=excluded.graded_at, late_days=excluded.late_days,"
                " penalty=excluded.penalty, late_note=excluded.late_note", (*_key(rec.key), *values))
            grade_id = self._id(rec.key)
            self.db.execute("DELETE FROM outcomes WHERE grade_id=?", (grade_id,))
            self.db.executemany("INSERT INTO outcomes VALUES (?, ?, ?, ?, ?, ?, ?)",
                                [(grade_id, o.nodeid, o.status, o.score, o.points, o.held_score, o.reason)
                                 for o in rec.outcomes])
            self._make_current(rec.key, grade_id)
        return grade_id

    def keep(self, key: GradeKey, late: Late) -> None:
        """A submission already graded: it is current again, with its lateness as known now."""
        with self.transaction():
            grade_id = self._id(key)
            self.db.execute("UPDATE grades SET submitted_at=?, late_days=?, penalty=?, late_note=? WHERE id=?",
                            (late.submitted_at, late.days, late.penalty, late.note, grade_id))
            self._make_current(key, grade_id)

    def _id(self, key: GradeKey) -> int:
        return self.db.execute("SELECT id FROM grades WHERE student=? AND assignment=? AND submission_hash=? "
                               "AND grader_version=?", _key(key)).fetchone()[0]

    def _make_current(self, key: GradeKey, grade_id: int) -> None:
        self.db.execute("UPDATE grades SET current = (id = ?) WHERE student=? AND assignment=?",
                        (grade_id, key.student, key.assignment))

    def current(self, assignment: str) -> list[sqlite3.Row]:
        """The current row of every student for `assignment`, by student."""
        return self.db.execute("SELECT * FROM grades WHERE assignment=? AND current=1 ORDER BY student",
                               (assignment,)).fetchall()

    def row(self, student: str, assignment: str) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM grades WHERE student=? AND assignment=? AND current=1",
                               (student, assignment)).fetchone()

    def outcomes(self, grade_id: int) -> list[Outcome]:
        rows = self.db.execute("SELECT nodeid, status, score, points, held_score, reason FROM outcomes "
                               "WHERE grade_id=? ORDER BY nodeid", (grade_id,)).fetchall()
        return [Outcome(*r) for r in rows]

    def held_outcomes(self, grade_id: int) -> list[Outcome]:
        """The tests of a grade held for an instructor's review (no points counted)."""
        return [o for o in self.outcomes(grade_id) if o.status == HELD]

    def manual(self, row: sqlite3.Row) -> dict[str, sqlite3.Row]:
        """Question -> the instructor's points for the submission of `row`."""
        found = self.db.execute("SELECT * FROM manual_points WHERE student=? AND assignment=? AND submission_hash=?",
                                (row["student"], row["assignment"], row["submission_hash"])).fetchall()
        return {r["question"]: r for r in found}

    def set_manual(self, student: str, assignment: str, question: str, points: float, comment: str = "") -> float:
        """Record an instructor's `points` for the written answer `question` (its id, e.g. "median") of
        the student's current submission; returns the question's full points."""
        row = self.row(student, assignment)
        if row is None or row["status"] != GRADED:
            raise ValueError(f"{student} has no graded submission of {assignment} in {self.path}")
        written = {o.nodeid: o for o in self.outcomes(row["id"]) if o.nodeid.endswith("::written")}
        outcome = written.get(f"answers/{question}.md::written")
        if outcome is None or outcome.status != MANUAL:
            pending = [n.split("/")[-1].removesuffix(".md::written") for n, o in written.items() if o.status == MANUAL]
            raise ValueError(f"{student}, {assignment}: no written answer {question!r} awaiting an instructor; "
                             f"awaiting: {', '.join(pending) or 'none'}")
        if not 0 <= points <= outcome.points:
            raise ValueError(f"{question}: points must lie in [0, {outcome.points:g}], got {points:g}")
        with self.transaction():
            self.db.execute("INSERT OR REPLACE INTO manual_points VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (student, assignment, row["submission_hash"], question, points, outcome.points,
                             comment, now()))
        return outcome.points


def _key(key: GradeKey) -> tuple[str, str, str, str]:
    return (key.student, key.assignment, key.submission_hash, key.grader_version)
