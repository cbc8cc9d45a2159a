"""Written answers: free text an instructor grades. End to end on a copy of the demo course with
one [[written]] question: the stub ships the question without the reference answer or the rubric,
grading marks a written answer pending (in no automatic total) and an empty one failed, every
report says so, and `autograder manual` records the instructor's points in results.json."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autograder.authoring.stubs import leaked_solutions, write_assignment
from autograder.host.grade import grade_assignment
from autograder.host.report import summary_line
from autograder.host.result_files import gradescope, markdown
from autograder.host.spec import parse_spec
from autograder.host.written import answer_text, record_manual

QUESTION = "Why does the median resist one slow repetition where the mean does not?"
WRITTEN = f'\n[[written]]\nid = "median"\npoints = 3\nquestion = "{QUESTION}"\n'
REFERENCE = ("The median is the middle order statistic: one outlier moves it by at most one "
             "position, while it moves the mean by outlier / n.")
ANSWER_FILE = f"""# median (3 points)
> {QUESTION}

<!-- BEGIN SOLUTION -->
{REFERENCE}
<!-- END SOLUTION -->
"""


@pytest.fixture
def course(demo_course):
    """The demo course with one written question; its stubs regenerated."""
    sol = demo_course.solutions / "s00_demo"
    with open(sol / "assignment.toml", "a") as fh:
        fh.write(WRITTEN)
    (sol / "answers").mkdir()
    (sol / "answers" / "median.md").write_text(ANSWER_FILE)
    (sol / "rubrics").mkdir()
    (sol / "rubrics" / "median.md").write_text("3: names the order statistic and quantifies the mean's shift\n")
    write_assignment(demo_course, "s00_demo")
    return demo_course


def test_the_stub_ships_the_question_without_the_answer_or_the_rubric(course):
    student = course.assignments / "s00_demo"
    shipped = (student / "answers" / "median.md").read_text()
    assert QUESTION in shipped and REFERENCE not in shipped and "<!-- your answer here -->" in shipped
    assert not (student / "rubrics").exists()
    assert leaked_solutions(student) == []
    (student / "answers" / "leak.md").write_text("<!-- BEGIN SOLUTION -->x<!-- END SOLUTION -->")
    assert leaked_solutions(student) == ["answers/leak.md: contains a written answer's solution markers"]


def test_a_written_answer_is_pending_and_in_no_automatic_total(course):
    ref = grade_assignment(course=course, assignment_id="s00_demo", solution=True, sandbox="none", hardware="cpu")
    row = next(t for t in ref.tests if t.test.nodeid == "answers/median.md::written")
    assert row.status == "manual" and row.score == 0 and row.max_score == 0 and REFERENCE in row.output
    assert ref.score == pytest.approx(11.0) and ref.max_score == pytest.approx(12.0)  # as without the question
    assert "1 written answer (3 points) pending an instructor's grading" in summary_line(ref)
    assert "all tests passed" not in summary_line(ref)
    assert "| 3 points |" in markdown([ref])


def test_an_unwritten_answer_fails_at_once(course):
    stub = grade_assignment(course=course, assignment_id="s00_demo", sandbox="none", hardware="cpu")
    row = next(t for t in stub.tests if t.test.nodeid == "answers/median.md::written")
    assert row.status == "failed" and row.max_score == 3 and "no answer written in answers/median.md" in row.reason
    assert stub.score == 0 and not stub.pending


def test_the_summary_denominator_stays_when_an_answer_is_written(course):
    """15 points either way: the unwritten answer fails (0 of 3), the written one is pending (3 points
    named apart), and neither moves the total's denominator."""
    stub = grade_assignment(course=course, assignment_id="s00_demo", sandbox="none", hardware="cpu")
    (course.assignments / "s00_demo" / "answers" / "median.md").write_text(ANSWER_FILE.replace(
        "<!-- BEGIN SOLUTION -->", "").replace("<!-- END SOLUTION -->", ""))
    written = grade_assignment(course=course, assignment_id="s00_demo", sandbox="none", hardware="cpu")
    tests = len([t for t in stub.tests if t.status != "not_graded"])
    assert summary_line(stub).startswith(f"s00_demo: 0/15 points, 0/{tests} tests passed"), summary_line(stub)
    assert summary_line(written).startswith(f"s00_demo: 0/15 points, 0/{tests} tests passed"), summary_line(written)
    assert "1 written answer (3 points) pending" in summary_line(written)


def test_an_answer_that_links_to_the_reference_is_refused(course):
    student = course.assignments / "s00_demo"
    (student / "answers" / "median.md").unlink()
    (student / "answers" / "median.md").symlink_to(course.solutions / "s00_demo" / "answers" / "median.md")
    stub = grade_assignment(course=course, assignment_id="s00_demo", sandbox="none", hardware="cpu")
    row = next(t for t in stub.tests if t.test.nodeid == "answers/median.md::written")
    assert row.status == "failed" and "is a link" in row.reason and REFERENCE not in row.output


def test_the_instructor_records_points_in_results_json(course, tmp_path):
    ref = grade_assignment(course=course, assignment_id="s00_demo", solution=True, sandbox="none", hardware="cpu")
    path = tmp_path / "results.json"
    path.write_text(json.dumps(gradescope([ref])))
    argv = [sys.executable, "-m", "autograder", "--root", str(course.root), "manual", str(path)]
    ok = subprocess.run([*argv, "s00_demo:median", "2.5", "--comment", "no quantity"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    data = json.loads(path.read_text())
    row = next(t for t in data["tests"] if t["name"].endswith("::written"))
    assert (row["score"], row["max_score"], row["extra_data"]["status"]) == (2.5, 3.0, "graded_manually")
    assert "no quantity" in row["output"] and data["score"] == pytest.approx(11.0 + 2.5)
    for bad, message in [(["s00_demo:median", "4"], "must lie in [0, 3]"), (["s00_demo:nope", "1"], "no written answer")]:
        run = subprocess.run([*argv, *bad], capture_output=True, text=True, check=False)
        assert run.returncode != 0 and message in run.stdout + run.stderr
    assert json.loads(path.read_text()) == data  # a refused call changes nothing


def test_record_manual_names_the_question_when_ambiguous():
    rows = [{"name": f"{aid}: answers/q.md::written", "score": 0, "max_score": 0,
             "extra_data": {"status": "manual", "points": 2}} for aid in ("s01_a", "s02_b")]
    with pytest.raises(ValueError, match="more than one"):
        record_manual({"tests": rows, "score": 0}, "q", 1)
    assert record_manual({"tests": rows, "score": 0}, "s02_b:q", 2)["score"] == 2


def test_answer_text_ignores_the_question_headings_and_comments():
    assert answer_text(f"# q\n> {QUESTION}\n\n<!-- your answer here -->\n") == ""
    assert answer_text("# q\n> asked\n\nMy answer.\n<!-- note -->") == "My answer."


@pytest.mark.parametrize(("entry", "message"), [
    ({"id": "Bad-Id", "points": 1, "question": "q"}, "lowercase"),
    ({"id": "q", "points": 0, "question": "q"}, "points must be > 0"),
    ({"id": "q", "points": 1, "question": "  "}, "question is empty"),
    ({"id": "q", "points": 1, "question": "q", "rubric": "x"}, r"\[\[written\]\] #1: unknown key 'rubric'"),
])
def test_a_malformed_written_question_is_rejected(entry, message):
    data = {"assignment": {"id": "s00_x", "title": "t", "stage": 0, "package": "x", "editable": ["x/*.py"]},
            "written": [entry]}
    with pytest.raises(ValueError, match=message):
        parse_spec(data)
