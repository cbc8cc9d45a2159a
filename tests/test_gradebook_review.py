"""`autograder gradebook review` and `gradebook held`: an instructor releases or denies tests held for
review in the class gradebook, without grading anything (synthetic gradings). A release awards what
the test earned before the hold, a denial 0 of its points; a decision is keyed on the submission (a
regrade keeps it, a new submission does not), keeps who/when/comment, and shows in the exports."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3

import pytest
from click.testing import CliRunner

from autograder.classroom import commands
from autograder.classroom.export import export_class, lms_csv, student_grades
from autograder.classroom.gradebook import GRADED, SCHEMA_VERSION, Gradebook, GradeKey, GradeRecord, Outcome
from autograder.classroom.reviews import held_tests, record_decision
from autograder.cli import cli
from autograder.errors import GraderError
from autograder.host.results import HELD, ExpectedTest, TestResult

AID = "s00_demo"
PERF = "hidden/test_perf.py::test_speed"
SCAN = "tests/test_a.py::test_add"


def _outcomes(perf_would_earn: float | None = 1.5) -> list[Outcome]:
    """A passed 1-point test, a held 2-point test (would earn 2) and a held 3-point perf test."""
    return [Outcome("tests/test_a.py::test_ok", "passed", 1.0, 1.0),
            Outcome(SCAN, HELD, 0.0, 2.0, 2.0, "held for an instructor's review: demo/ops.py:3: uses ctypes"),
            Outcome(PERF, HELD, 0.0, 3.0, perf_would_earn, "faster than the card's peak\nmore detail")]


def _record(book: Gradebook, student: str = "alice", sub: str = "h1", version: str = "v1") -> int:
    return book.record(GradeRecord(GradeKey(student, AID, sub, version), GRADED, 1.0, 1.0, outcomes=_outcomes()))


def _grade(book: Gradebook, student: str = "alice"):
    return next(g for g in student_grades(book, AID) if g.row["student"] == student)


def test_a_release_awards_what_the_test_earned_before_the_hold_and_a_denial_nothing(tmp_path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        _record(book)
        before = _grade(book)
        assert (before.score, before.max_score, before.held_points) == (1.0, 1.0, 5.0)
        [released] = record_decision(book, student="alice", assignment=AID, test="::test_speed", release=True,
                                     reviewer="prof", comment="checked the trace")
        assert released.awarded == 1.5  # the perf credit it earned before the hold, not its 3 points
        after = _grade(book)
        assert (after.score, after.max_score, after.held_points, after.released_points) == (2.5, 4.0, 2.0, 1.5)
        assert after.status == "held for review (2 points)"
        record_decision(book, student="alice", assignment=AID, test="all", release=False, reviewer="prof")
        done = _grade(book)
    # the denied 2-point test counts as 0 of 2: 1 + 1.5 of 1 + 3 + 2
    assert (done.score, done.max_score, done.held_points, done.status) == (2.5, 6.0, 0.0, GRADED)


def test_a_regrade_of_the_same_submission_keeps_the_decision_and_a_new_submission_does_not(tmp_path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        _record(book)
        record_decision(book, student="alice", assignment=AID, test=SCAN, release=True, reviewer="prof")
        _record(book, version="v2")  # the same submission graded by a newer grader
        assert _grade(book).score == 3.0
        assert [h.outcome.nodeid for h in held_tests(book, AID) if not h.decision] == [PERF]
        _record(book, sub="h2")      # a new submission: held again, nothing released
        fresh = _grade(book)
        assert (fresh.score, fresh.held_points) == (1.0, 5.0)


def test_denied_and_released_tests_are_no_longer_listed_as_held_and_the_trail_keeps_every_decision(tmp_path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        _record(book)
        record_decision(book, student="alice", assignment=AID, test=SCAN, release=False, reviewer="ta",
                        comment="ctypes")
        record_decision(book, student="alice", assignment=AID, test=SCAN, release=True, reviewer="prof",
                        comment="ctypes only loads libm")  # an explicit name revises; the trail keeps both
        awaiting = [h.outcome.nodeid for h in held_tests(book, AID) if h.decision is None]
        assert awaiting == [PERF]
        folder = export_class(book=book, assignment_id=AID, out=tmp_path)
        assert _grade(book).score == 3.0
    trail = list(csv.DictReader(io.StringIO((folder / "reviews.csv").read_text())))
    assert [(r["decision"], r["reviewer"], r["comment"], r["current"]) for r in trail] == [
        ("denied", "ta", "ctypes", "0"), ("released", "prof", "ctypes only loads libm", "1")]
    assert trail[1]["reviewed_at"] and trail[1]["points"] == "2"
    shown = (folder / "students" / "alice.md").read_text()
    assert "released by an instructor: 2/2: ctypes only loads libm" in shown and "| released | 2/2 |" in shown


def test_the_csv_counts_released_points_and_the_student_results_show_the_decision(tmp_path):
    results = {"score": 1.0, "output": "", "tests": [
        {"name": f"{AID}: {SCAN}", "score": 0, "max_score": 0, "status": "pending", "output": "",
         "extra_data": {"status": HELD, "points": 2.0, "held_score": 2.0}}]}
    (tmp_path / "alice.json").write_text(json.dumps(results))
    with Gradebook(tmp_path / "gb.sqlite") as book:
        book.record(GradeRecord(GradeKey("alice", AID, "h1", "v1"), GRADED, 1.0, 1.0, results_path="alice.json",
                                outcomes=_outcomes()))
        record_decision(book, student="alice", assignment=AID, test=SCAN, release=True, reviewer="prof", comment="fine")
        [row] = csv.DictReader(io.StringIO(lms_csv(student_grades(book, AID))))
        folder = export_class(book=book, assignment_id=AID, out=tmp_path)
    assert (row["score"], row["max_score"], row["held_points"], row["released_points"]) == ("3", "3", "3", "2")
    shown = json.loads((folder / "students" / "alice.json").read_text())
    assert shown["score"] == 3.0
    [test] = shown["tests"]
    assert (test["score"], test["max_score"]) == (2.0, 2.0) and test["output"].startswith("released by an instructor")


@pytest.mark.parametrize(("student", "assignment", "test", "message"), [
    ("zoe", AID, "all", "no student 'zoe' with a submission of s00_demo; students: alice"),
    ("alice", "s99_none", "all", "no assignment 's99_none'"),
    ("alice", AID, "::test_nope", "alice, s00_demo: no test '::test_nope' in this grading; held: hidden/test_perf"),
    ("alice", AID, "::test_ok", "'::test_ok' is not held for review (tests/test_a.py::test_ok: passed)"),
])
def test_an_unknown_student_assignment_or_test_or_one_not_held_is_refused_by_name(tmp_path, student, assignment,
                                                                                  test, message):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        _record(book)
        with pytest.raises(ValueError, match=re.escape(message)):
            record_decision(book, student=student, assignment=assignment, test=test, release=True, reviewer="prof")
        assert book.db.execute("SELECT COUNT(*) FROM reviews").fetchone()[0] == 0


def test_all_with_nothing_awaiting_is_refused(tmp_path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        _record(book)
        record_decision(book, student="alice", assignment=AID, test="all", release=False, reviewer="prof")
        with pytest.raises(ValueError, match="no held test awaits a decision"):
            record_decision(book, student="alice", assignment=AID, test="all", release=True, reviewer="prof")


def test_the_commands_review_list_and_exit_non_zero_on_a_test_not_held(tmp_path, monkeypatch):
    monkeypatch.setattr(commands.console, "_width", 250)  # wide enough that no cell of the listing is folded
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        _record(book)
        _record(book, student="bob")
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(cli, ["gradebook", *args, "--out", str(tmp_path)])

    listed = run("held", AID)
    assert listed.exit_code == 0, listed.output
    assert "uses ctypes" in listed.output and "1.5/3" in listed.output and "4 awaiting a decision" in listed.output
    done = run("review", AID, "alice", "all", "--release", "--by", "prof", "--comment", "looked at it")
    assert done.exit_code == 0, done.output
    assert "alice, s00_demo: hidden/test_perf.py::test_speed: 1.5/3 (released)" in done.output
    assert "2 awaiting a decision" in run("held", AID).output
    audit = run("held", AID, "--student", "alice", "--decided")
    assert "released by an instructor: 2/2 (prof," in audit.output and "looked at it" in audit.output
    refused = run("review", AID, "bob", "::test_ok", "--deny")
    # a GraderError: `python -m autograder` prints it and exits 2
    assert isinstance(refused.exception, GraderError) and "is not held for review" in str(refused.exception)
    exported = (tmp_path / AID / "export" / "grades.csv").read_text()
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(exported))}
    assert (rows["alice"]["score"], rows["bob"]["score"], rows["bob"]["held_points"]) == ("4.5", "1", "5")


V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE grades (
    id INTEGER PRIMARY KEY, student TEXT NOT NULL, assignment TEXT NOT NULL, submission_hash TEXT NOT NULL,
    grader_version TEXT NOT NULL, status TEXT NOT NULL, score REAL, max_score REAL, results_path TEXT,
    hardware TEXT, note TEXT NOT NULL DEFAULT '', submitted_at TEXT, graded_at TEXT NOT NULL,
    late_days INTEGER NOT NULL DEFAULT 0, penalty REAL NOT NULL DEFAULT 0, late_note TEXT NOT NULL DEFAULT '',
    current INTEGER NOT NULL DEFAULT 1, UNIQUE (student, assignment, submission_hash, grader_version));
CREATE TABLE outcomes (grade_id INTEGER NOT NULL REFERENCES grades(id) ON DELETE CASCADE, nodeid TEXT NOT NULL,
    status TEXT NOT NULL, score REAL NOT NULL, points REAL NOT NULL, PRIMARY KEY (grade_id, nodeid));
CREATE TABLE manual_points (student TEXT NOT NULL, assignment TEXT NOT NULL, submission_hash TEXT NOT NULL,
    question TEXT NOT NULL, points REAL NOT NULL, max_points REAL NOT NULL, comment TEXT NOT NULL DEFAULT '',
    graded_at TEXT NOT NULL, PRIMARY KEY (student, assignment, submission_hash, question));
INSERT INTO meta VALUES ('schema', '1');
INSERT INTO grades (id, student, assignment, submission_hash, grader_version, status, score, max_score, results_path,
    graded_at) VALUES (1, 'alice', 's00_demo', 'h1', 'v1', 'graded', 1.0, 1.0, 'alice.json',
    '2027-01-11T00:00:00+00:00');
INSERT INTO outcomes VALUES (1, 'tests/test_a.py::test_ok', 'passed', 1.0, 1.0);
INSERT INTO outcomes VALUES (1, 'tests/test_a.py::test_add', 'held', 0.0, 2.0);
"""


def test_a_schema_1_gradebook_opens_migrated_and_a_release_reads_what_its_results_file_recorded(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    with sqlite3.connect(path) as con:
        con.executescript(V1_SCHEMA)
    results = {"extra_data": {"autograder": {"assignments": {AID: {"submission_hash": "h1"}}}}, "tests": [
        {"name": f"{AID}: {SCAN}", "extra_data": {"status": HELD, "points": 2.0, "held_score": 2.0}}]}
    with Gradebook(path) as book:
        assert book.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == SCHEMA_VERSION
        [held] = held_tests(book, AID)
        assert (held.outcome.held_score, held.outcome.reason) == (None, "")  # not recorded before schema 2
        with pytest.raises(ValueError, match="regrade with `grade-class --regrade`"):
            record_decision(book, student="alice", assignment=AID, test=SCAN, release=True, reviewer="prof")
        (tmp_path / "alice.json").write_text(json.dumps(results))
        record_decision(book, student="alice", assignment=AID, test=SCAN, release=True, reviewer="prof", root=tmp_path)
        assert _grade(book).score == 3.0
    with Gradebook(path) as again:  # reopening a migrated file migrates nothing twice
        assert [h.outcome.held_score for h in held_tests(again, AID)] == [2.0]


def test_a_grading_s_held_test_is_recorded_with_what_a_release_awards_and_why():
    test = ExpectedTest(SCAN, "tests/test_a.py", 2.0, False, False)
    held = Outcome.of(TestResult(test, HELD, "held for an instructor's review: uses ctypes", held_score=2.0))
    passed = Outcome.of(TestResult(test, "passed", score=2.0))
    assert (held.held_score, held.reason) == (2.0, "held for an instructor's review: uses ctypes")
    assert (passed.score, passed.held_score, passed.reason) == (2.0, None, "")
