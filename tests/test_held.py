"""The "held for review" status end to end: a test whose body raises the judge's HeldForReview, and
every passed test of a submission the tamper scan flags, are HELD: no points, in no automatic total,
named with their reason in the terminal table, results.json, JUnit, the Markdown summary and the
gradebook's exports. One demo grading; the rest is plain data."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest
from conftest import FIXTURES, MANIFEST_CACHE

from autograder.classroom.export import pass_rates, student_grades
from autograder.classroom.gradebook import GRADED, Gradebook, GradeKey, GradeRecord, Outcome
from autograder.host import report, result_files
from autograder.host.collect import _from_record
from autograder.host.course_files import ignore
from autograder.host.grade import grade_assignment
from autograder.host.repo import Course
from autograder.host.results import HELD, AssignmentResult, ExpectedTest, TestResult
from autograder.judge.replies import remote_exception
from autograder.judge.verdict import TestState as _TestState
from autograder.judge.verdict import verdict as _verdict
from autograder.protocol.messages import HeldForReview

TAMPERING = FIXTURES / "tampering"
JUDGE_HOLDS = '''
import pytest
from autograder.protocol.messages import HeldForReview

import demo


@pytest.mark.points(3)
def test_a_speed_past_the_card_is_held():
    assert demo.add(1, 2) == 3
    raise HeldForReview("the timing implies 9.9 PFLOP/s, past this card's peak")


@pytest.mark.points(1)
def test_an_exception_the_worker_names_heldforreview_is_a_failure():
    demo.claim_held()
'''
PEAK_REASON = "the timing implies 9.9 PFLOP/s, past this card's peak"


@pytest.fixture(scope="module")
def flagged(tmp_path_factory):
    """The demo course with a judge-side hold, grading the scan_sys_modules attack (right answers,
    and a reach into the grader through sys.modules by a computed name)."""
    root = tmp_path_factory.mktemp("held") / "course"
    shutil.copytree(FIXTURES / "demo_course", root, ignore=ignore())
    (root / "solutions/s00_demo/tests/test_judge_holds.py").write_text(textwrap.dedent(JUDGE_HOLDS))
    course = Course(root, cache=MANIFEST_CACHE)
    sub = root.parent / "submission"
    shutil.copytree(course.assignments / "s00_demo", sub)
    shutil.copytree(TAMPERING / "scan_sys_modules", sub, dirs_exist_ok=True)
    result = grade_assignment(course=course, assignment_id="s00_demo", submission=sub, sandbox="none",
                              hardware="cpu")
    return result, {t.test.nodeid.split("::")[1].split("[")[0]: t for t in result.tests}


def test_a_flagged_submission_earns_nothing_and_its_passed_tests_are_held_with_the_finding(flagged):
    result, by_name = flagged
    statuses = [(t.test.nodeid, t.status, t.score) for t in result.tests]
    assert result.score == 0 and not [t for t in result.tests if t.status == "passed"], statuses
    # only what failed counts in the total: a held test is in none
    assert result.max_score == sum(t.test.points for t in result.tests if t.status == "failed"), statuses
    for name in ("test_add_small_integers", "test_mean_matches_fsum", "test_mean_of_empty_list_raises_value_error",
                 "test_add_speed_ratio_is_recorded"):
        assert by_name[name].status == HELD, (name, by_name[name].status, by_name[name].reason)
        assert "demo/ops.py:6: uses sys.modules" in by_name[name].reason
    assert by_name["test_add_on_gpu_tensors"].status == "not_graded"
    assert by_name["test_add_speed_ratio_is_recorded"].perf_notes  # what a reviewer would be granting
    assert result.notes[0].startswith("held for an instructor's review (")


def test_heldforreview_raised_in_the_judge_holds_with_its_reason_and_a_worker_s_namesake_fails(flagged):
    _result, by_name = flagged
    held = by_name["test_a_speed_past_the_card_is_held"]
    assert (held.status, held.reason, held.score) == (HELD, PEAK_REASON, 0)
    forged = by_name["test_an_exception_the_worker_names_heldforreview_is_a_failure"]
    assert forged.status == "failed" and "the worker asks for a review" in forged.reason


def test_held_tests_are_named_with_their_reason_in_every_report(flagged, tmp_path):
    result, _ = flagged
    result_files.write_files([result], error=None, meta=None, json_path=str(tmp_path / "r.json"),
                       junit_path=str(tmp_path / "j.xml"), markdown_path=str(tmp_path / "s.md"))
    data = json.loads((tmp_path / "r.json").read_text())
    row = next(r for r in data["tests"] if r["name"].endswith("test_a_speed_past_the_card_is_held"))
    assert "score" not in row and "status" not in row  # neutral: neither a pass nor a failure
    assert row["output"].startswith("held for an instructor's review; no points counted") and PEAK_REASON in row["output"]
    assert f"held: tests/test_judge_holds.py::test_a_speed_past_the_card_is_held: {PEAK_REASON}" in data["output"]
    assert ") held for an instructor's review; no points counted" in data["output"]
    markdown = (tmp_path / "s.md").read_text()
    assert "held for an instructor's review; no points counted" in markdown and PEAK_REASON in markdown
    assert 'skipped message="held for an instructor\'s review' in (tmp_path / "j.xml").read_text()
    assert "all tests passed" not in report.summary_line(result)


def _state(**kw: str) -> _TestState:
    return _TestState(**({"setup": "passed", "call": "failed", "teardown": "passed"} | kw), entered=True)


def test_the_verdict_holds_only_a_body_stopped_by_the_judge_s_hold():
    assert _verdict(_state(held="past peak", call_raised="HeldForReview")) == ("held", "past peak")
    assert _verdict(_state(held="past peak", violation="aten::mm is forbidden"))[0] == "failed"
    assert _verdict(_state(held="past peak", teardown="failed"))[0] == "error"
    assert _verdict(_state(held="", failure="AssertionError: x"))[0] == "failed"
    mirror = remote_exception({"type": "HeldForReview", "bases": ["AssertionError"], "module": "demo.ops",
                               "message": "hold me"})
    assert isinstance(mirror, AssertionError) and not isinstance(mirror, HeldForReview)


def test_a_held_record_is_collected_and_scores_nothing():
    test = ExpectedTest("tests/test_a.py::t", "tests/test_a.py", 2.0, False, False)
    held = _from_record(test, {"status": "held", "reason": "past peak", "metrics": {}})
    assert (held.status, held.reason, held.graded, held.max_score) == (HELD, "past peak", False, 0.0)


def test_the_gradebook_keeps_held_points_apart_and_out_of_pass_rates(tmp_path):
    outcomes = [Outcome("tests/test_a.py::t0", "passed", 1.0, 1.0), Outcome("tests/test_a.py::t1", HELD, 0.0, 2.0)]
    with Gradebook(tmp_path / "gb.sqlite") as book:
        grade_id = book.record(GradeRecord(GradeKey("alice", "s00_demo", "h1", "v"), GRADED, 1.0, 1.0,
                                           outcomes=outcomes))
        assert [o.nodeid for o in book.held_outcomes(grade_id)] == ["tests/test_a.py::t1"]
        [alice] = student_grades(book, "s00_demo")
    assert (alice.score, alice.max_score, alice.held_points) == (1.0, 1.0, 2.0)
    assert alice.status == "held for review (2 points)"
    assert [r[0] for r in pass_rates([alice])] == ["tests/test_a.py::t0"]


def test_the_summary_counts_held_points_apart():
    r = AssignmentResult("s00_demo", "Demo", "cpu", "none", "student")
    test = ExpectedTest("tests/test_a.py::t", "tests/test_a.py", 2.0, False, False)
    r.tests = [TestResult(test, HELD, "held for an instructor's review: demo/ops.py:1: walks the garbage collector")]
    line = report.summary_line(r)
    assert line.startswith("s00_demo: 0/2 points") and "1 test (2 points) held for an instructor's review" in line


def test_an_instructor_releases_or_denies_held_tests_in_the_results_file(flagged, tmp_path):
    """`autograder review`: a released test earns what it earned before the hold (its points; a perf
    test its credit from the metrics it recorded), a denied one nothing; the total follows."""
    from click.testing import CliRunner

    from autograder.cli import cli
    from autograder.host.review import record_review

    result, _ = flagged
    path = tmp_path / "r.json"
    result_files.write_files([result], error=None, meta=None, json_path=str(path), junit_path=None, markdown_path=None)
    data = json.loads(path.read_text())
    assert data["score"] == 0
    with pytest.raises(ValueError, match="no held test 'test_nothing_like_it'.*test_add_small_integers"):
        record_review(data, "test_nothing_like_it", release=True)
    out = CliRunner().invoke(cli, ["review", str(path), "::test_add_small_integers", "--release", "--comment", "ok"])
    assert out.exit_code == 0, out.output
    data = json.loads(path.read_text())
    row = next(r for r in data["tests"] if r["name"].endswith("::test_add_small_integers"))
    assert (row["score"], row["max_score"], row["status"]) == (row["extra_data"]["points"],) * 2 + ("passed",)
    assert row["output"].startswith("released by an instructor") and data["score"] == row["score"]
    denied = record_review(data, "all", release=False)
    assert denied and all(r["score"] == 0 and r["status"] == "failed" for r in denied)
    assert data["score"] == row["score"]  # the released test is no longer held: "all" left it alone
