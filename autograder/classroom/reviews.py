"""An instructor's review of held tests in the class gradebook: release or deny, with an audit trail.

The gradebook form of `autograder review` (autograder/host/review.py, whose rule it shares: a release
awards what the test earned before the hold, a denial nothing). A decision is keyed like written-answer
points on (student, assignment, submission hash, test): a regrade of the same submission keeps it, a new
submission starts held again. The `reviews` table is append-only: the latest row of a test is the
decision, every row stays as the trail (who, when, comment). A decided test counts in the totals (a
release its points, a denial 0 of its points) and is no longer listed as held.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from autograder.classroom.gradebook import GRADED, Gradebook, Outcome, now
from autograder.host.results import HELD
from autograder.host.review import awards, is_named, verdict


@dataclass(frozen=True)
class Review:
    """One instructor's decision on one held test."""

    released: bool
    points: float       # what it awarded when it was taken
    max_points: float
    reviewer: str
    comment: str
    reviewed_at: str

    def line(self) -> str:
        said = verdict(self.released, self.points, self.max_points)
        return f"{said} ({self.reviewer}, {self.reviewed_at})" + (f": {self.comment}" if self.comment else "")


@dataclass(frozen=True)
class HeldTest:
    """A test of a student's current grading that the judge or the tamper scan held, and its decision."""

    student: str
    assignment: str
    submission_hash: str
    outcome: Outcome
    decision: Review | None

    @property
    def name(self) -> str:
        """The test as results.json names it ("<id>: <nodeid>"), which `is_named` matches."""
        return f"{self.assignment}: {self.outcome.nodeid}"

    @property
    def awarded(self) -> float:
        """Points counted: nothing while held; once decided, the review's rule on this grading."""
        if self.decision is None:
            return 0.0
        would = self.outcome.held_score if self.outcome.held_score is not None else self.decision.points
        return awards(would, self.decision.released)


def decisions(book: Gradebook, row: sqlite3.Row) -> dict[str, Review]:
    """Test nodeid -> the latest decision on it for the submission of `row`."""
    found = book.db.execute("SELECT * FROM reviews WHERE student=? AND assignment=? AND submission_hash=? ORDER BY id",
                            (row["student"], row["assignment"], row["submission_hash"])).fetchall()
    return {r["nodeid"]: _review(r) for r in found}  # later rows overwrite earlier ones


def held_of(book: Gradebook, row: sqlite3.Row) -> list[HeldTest]:
    """The held tests of the grading `row`, decided or not."""
    if row["status"] != GRADED:
        return []
    decided = decisions(book, row)
    return [HeldTest(row["student"], row["assignment"], row["submission_hash"], o, decided.get(o.nodeid))
            for o in book.held_outcomes(row["id"])]


def held_tests(book: Gradebook, assignment: str, student: str | None = None) -> list[HeldTest]:
    """The held tests of every current grading of `assignment` (or of `student`'s), by student."""
    rows = [r for r in book.current(assignment) if student is None or r["student"] == student]
    return [h for r in rows for h in held_of(book, r)]


def trail(book: Gradebook, assignment: str) -> list[sqlite3.Row]:
    """Every decision ever taken on `assignment`'s held tests, oldest first (the audit trail)."""
    return book.db.execute("SELECT * FROM reviews WHERE assignment=? ORDER BY id", (assignment,)).fetchall()


def record_decision(book: Gradebook, *, student: str, assignment: str, test: str, release: bool, reviewer: str,
                    comment: str = "", root: Path | None = None) -> list[HeldTest]:
    """Release or deny the held tests `test` names in `student`'s current grading of `assignment`:
    "all" (every one still awaiting a decision), a nodeid, or its end (an explicit name may revise an
    earlier decision; the trail keeps both). `root`: the class folder, where a schema-1 grading's
    results file says what a release awards. Returns the tests decided; ValueError says what is wrong."""
    if not reviewer.strip():
        raise ValueError("a decision needs the reviewer's name")
    row = _graded_row(book, student, assignment)
    targets = _targets(book, row, test)
    with book.transaction():
        for h in targets:
            points = awards(_would_earn(book, row, h.outcome, root) if release else 0.0, release)
            book.db.execute("INSERT INTO reviews (student, assignment, submission_hash, nodeid, released, points,"
                            " max_points, reviewer, comment, reviewed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (student, assignment, row["submission_hash"], h.outcome.nodeid, int(release),
                             round(points, 4), h.outcome.points, reviewer, comment, now()))
    decided = {h.outcome.nodeid for h in targets}
    return [h for h in held_of(book, row) if h.outcome.nodeid in decided]


def _graded_row(book: Gradebook, student: str, assignment: str) -> sqlite3.Row:
    rows = book.current(assignment)
    if not rows:
        known = [r[0] for r in book.db.execute("SELECT DISTINCT assignment FROM grades ORDER BY assignment")]
        raise ValueError(f"no assignment {assignment!r} in {book.path}; it holds: {', '.join(known) or 'nothing'}")
    row = next((r for r in rows if r["student"] == student), None)
    if row is None:
        names = [r["student"] for r in rows]
        more = f", ... ({len(names)} in all)" if len(names) > 20 else ""
        raise ValueError(f"no student {student!r} with a submission of {assignment}; students: "
                         f"{', '.join(names[:20])}{more}")
    if row["status"] != GRADED:
        raise ValueError(f"{student}'s current submission of {assignment} was not graded ({row['status']}): "
                         "it has no held test")
    return row


def _targets(book: Gradebook, row: sqlite3.Row, test: str) -> list[HeldTest]:
    held = held_of(book, row)
    who = f"{row['student']}, {row['assignment']}"
    waiting = [h.outcome.nodeid for h in held if h.decision is None]
    if test == "all":
        if not waiting:
            raise ValueError(f"{who}: no held test awaits a decision (decided: {len(held)})")
        return [h for h in held if h.decision is None]
    chosen = [h for h in held if is_named(test, h.name)]
    if chosen:
        return chosen
    named = [o for o in book.outcomes(row["id"]) if is_named(test, f"{row['assignment']}: {o.nodeid}")]
    if named:
        statuses = ", ".join(f"{o.nodeid}: {o.status}" for o in named)
        raise ValueError(f"{who}: {test!r} is not held for review ({statuses}); "
                         f"held: {', '.join(h.outcome.nodeid for h in held) or 'none'}")
    raise ValueError(f"{who}: no test {test!r} in this grading; held: {', '.join(waiting) or 'none awaiting'}")


def _would_earn(book: Gradebook, row: sqlite3.Row, outcome: Outcome, root: Path | None) -> float:
    """What the test earned before the hold: recorded with the outcome, or (a grading recorded before
    schema 2) read from its results file, if that file is of this submission, and recorded then."""
    if outcome.held_score is not None:
        return outcome.held_score
    score = _from_results_file(row, outcome, root)
    if score is None:
        raise ValueError(f"{row['student']}, {outcome.nodeid}: what a release awards was not recorded for this "
                         "grading (graded before the gradebook kept it): regrade with `grade-class --regrade`")
    book.db.execute("UPDATE outcomes SET held_score=? WHERE grade_id=? AND nodeid=?",
                    (score, row["id"], outcome.nodeid))
    return score


def _from_results_file(row: sqlite3.Row, outcome: Outcome, root: Path | None) -> float | None:
    path = root / row["results_path"] if root is not None and row["results_path"] else None
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text())
    meta = data.get("extra_data", {}).get("autograder", {}).get("assignments", {}).get(row["assignment"], {})
    if meta.get("submission_hash") != row["submission_hash"]:
        return None  # the file of another submission of this student
    name = f"{row['assignment']}: {outcome.nodeid}"
    found = [t for t in data.get("tests", [])
             if t.get("name") == name and t.get("extra_data", {}).get("status") == HELD]
    return float(found[0]["extra_data"].get("held_score", 0.0)) if found else None


def _review(r: sqlite3.Row) -> Review:
    return Review(bool(r["released"]), r["points"], r["max_points"], r["reviewer"], r["comment"], r["reviewed_at"])
