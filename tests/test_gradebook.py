"""The gradebook (SQLite) and its exports, without grading anything: records keyed on student,
assignment, submission hash and grader version; one transaction per grade; instructor points for
written answers pending until entered; the LMS CSV, per-student results and the class report."""

from __future__ import annotations

import csv
import io
import json
import sqlite3

import pytest

from autograder.classroom.export import export_class, lms_csv, pass_rates, student_grades
from autograder.classroom.gradebook import GRADED, Gradebook, GradeKey, GradeRecord, Late, Outcome
from autograder.host.results import ExpectedTest, TestResult

VERSION = "0.1.0+abc"


def _outcomes(passed: int, written: str = "") -> list[Outcome]:
    """Three 1-point tests of which `passed` pass, and a 3-point written answer in `written` status."""
    rows = [Outcome(f"tests/test_a.py::t{i}", "passed" if i < passed else "failed", float(i < passed), 1.0)
            for i in range(3)]
    rows.append(Outcome("hidden/test_b.py::on_gpu", "not_graded", 0.0, 2.0))
    if written:
        rows.append(Outcome("answers/median.md::written", written, 0.0, 3.0))
    return rows


def _grade(student: str, passed: int, *, sub: str = "h1", written: str = "", late: Late | None = None,
           results_path: str | None = None) -> GradeRecord:
    max_score = 3.0 + (3.0 if written == "failed" else 0.0)
    return GradeRecord(GradeKey(student, "s00_demo", sub, VERSION), GRADED, float(passed), max_score,
                       results_path, "cpu", late=late or Late(), outcomes=_outcomes(passed, written))


def test_a_grade_is_recorded_once_per_key_and_the_latest_submission_is_current(tmp_path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        first = book.record(_grade("alice", 1))
        assert book.has_grade(GradeKey("alice", "s00_demo", "h1", VERSION))
        assert not book.has_grade(GradeKey("alice", "s00_demo", "h1", "0.1.0+other"))
        assert book.record(_grade("alice", 2)) == first  # a regrade of the same key replaces, never adds
        book.record(_grade("alice", 3, sub="h2"))         # a new submission: a new row, now current
        rows = book.db.execute("SELECT submission_hash, score, current FROM grades ORDER BY id").fetchall()
        assert [tuple(r) for r in rows] == [("h1", 2.0, 0), ("h2", 3.0, 1)]
        assert len(book.outcomes(first)) == 4
        book.keep(GradeKey("alice", "s00_demo", "h1", VERSION), Late("2027-01-12T00:00:00+00:00", 2, 0.2, "2 days"))
        current = book.current("s00_demo")
        assert [(r["submission_hash"], r["late_days"], r["penalty"]) for r in current] == [("h1", 2, 0.2)]


def test_a_grade_that_fails_to_write_leaves_nothing(tmp_path):
    """One transaction per grade: a record whose outcomes cannot be written leaves no row at all."""
    with Gradebook(tmp_path / "gb.sqlite") as book:
        broken = _grade("bob", 1)
        broken.outcomes.append(broken.outcomes[0])  # a duplicate test id: the outcomes insert fails
        with pytest.raises(sqlite3.IntegrityError):
            book.record(broken)
        assert book.db.execute("SELECT COUNT(*) FROM grades").fetchone()[0] == 0
        assert book.db.execute("SELECT COUNT(*) FROM outcomes").fetchone()[0] == 0


def test_a_row_has_a_score_exactly_when_graded():
    with pytest.raises(ValueError, match="exactly when its status is 'graded'"):
        GradeRecord(GradeKey("c", "s00_demo", "h", VERSION), "broken_archive", score=0.0)
    with pytest.raises(ValueError):
        GradeRecord(GradeKey("c", "s00_demo", "h", VERSION), GRADED)


def test_written_points_stay_pending_until_an_instructor_enters_them(tmp_path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        book.record(_grade("alice", 3, written="manual"))
        book.record(_grade("bob", 0, written="failed"))  # an unwritten answer failed at once: nothing to grade
        [alice, bob] = student_grades(book, "s00_demo")
        assert (alice.score, alice.max_score, alice.pending_points) == (3.0, 6.0, 3.0)
        assert alice.status == "pending manual grading (3 points)" and bob.status == GRADED
        with pytest.raises(ValueError, match="must lie in"):
            book.set_manual("alice", "s00_demo", "median", 4)
        with pytest.raises(ValueError, match="no written answer 'nope' awaiting an instructor; awaiting: median"):
            book.set_manual("alice", "s00_demo", "nope", 1)
        with pytest.raises(ValueError, match="awaiting: none"):
            book.set_manual("bob", "s00_demo", "median", 1)
        assert book.set_manual("alice", "s00_demo", "median", 2.5, "good") == 3.0
        [alice, _] = student_grades(book, "s00_demo")
        assert (alice.score, alice.manual_points, alice.pending_points, alice.status) == (5.5, 2.5, 0, GRADED)
        book.record(_grade("alice", 3, sub="h2", written="manual"))  # resubmitted: its answer is new, so pending
        [alice, _] = student_grades(book, "s00_demo")
        assert (alice.score, alice.pending_points) == (3.0, 3.0)


def test_the_csv_applies_the_late_penalty_and_leaves_ungraded_rows_blank(tmp_path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        book.record(_grade("alice", 3, late=Late("2027-01-12T10:00:00+00:00", 2, 0.2, "2 days late: -20%")))
        book.record(GradeRecord(GradeKey("dan", "s00_demo", "x", VERSION), "broken_archive",
                                note="dan.zip does not unpack"))
        rows = list(csv.DictReader(io.StringIO(lms_csv(student_grades(book, "s00_demo")))))
    assert [(r["student"], r["score"], r["auto_score"], r["status"]) for r in rows] == [
        ("alice", "2.4", "3", "graded"), ("dan", "", "", "broken_archive")]
    assert "does not unpack" in rows[1]["note"] and rows[0]["late_days"] == "2"


def test_pass_rates_put_the_tests_the_class_fails_most_first_and_skip_tests_not_graded_here(tmp_path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        for student, passed in [("a", 1), ("b", 2), ("c", 3)]:
            book.record(_grade(student, passed))
        rates = pass_rates(student_grades(book, "s00_demo"))
    assert [(t.split("::")[1], p, n) for t, _rate, p, n, _pts in rates] == [("t2", 1, 3), ("t1", 2, 3), ("t0", 3, 3)]


def test_exports_give_each_student_their_results_with_the_instructors_points(tmp_path):
    from autograder.host import result_files
    from autograder.host.results import AssignmentResult

    result = AssignmentResult("s00_demo", "Demo", "cpu", "none", "x")
    written = ExpectedTest("answers/median.md::written", "answers/median.md", 3.0, False, False)
    gpu = ExpectedTest("hidden/test_b.py::on_gpu", "hidden/test_b.py", 2.0, True, False)
    result.tests = [TestResult(ExpectedTest("tests/test_a.py::t0", "tests/test_a.py", 1.0, False, False), "passed",
                               score=1.0), TestResult(written, "manual", "pending"), TestResult(gpu, "not_graded")]
    result_files.write_json(tmp_path / "s00_demo" / "results" / "alice.json", [result])
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record(_grade("alice", 1, written="manual", results_path="s00_demo/results/alice.json",
                           late=Late("2027-01-11T10:00:00+00:00", 1, 0.5, "1 day late: -50%")))
        book.set_manual("alice", "s00_demo", "median", 3, "complete")
        folder = export_class(book=book, assignment_id="s00_demo", out=tmp_path)
    data = json.loads((folder / "students" / "alice.json").read_text())
    row = next(t for t in data["tests"] if t["name"].endswith("::written"))
    assert (row["score"], row["max_score"], row["status"]) == (3, 3.0, "passed") and "complete" in row["output"]
    assert data["score"] == pytest.approx((1 + 3) * 0.5) and "1 day late" in data["output"]
    gpu_row = next(t for t in data["tests"] if t["name"].endswith("on_gpu"))
    assert "status" not in gpu_row and "score" not in gpu_row and gpu_row["output"].startswith("NOT GRADED HERE")
    assert "Score: 2/6" in (folder / "students" / "alice.md").read_text()
    report_md = (folder / "report.md").read_text()
    assert "| `tests/test_a.py::t1` | 1 | 0% | 0 | 1 |" in report_md
    assert (folder / "report.png").read_bytes().startswith(b"\x89PNG")
