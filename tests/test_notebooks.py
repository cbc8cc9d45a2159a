"""The notebook track end to end: a source notebook released by nbgrader, filled as a student
would, graded through the judge and worker like a package, its written cell pending in the
gradebook until an instructor enters points."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder.classroom.gradebook import GRADED, Gradebook
from autograder.cli import cli
from autograder.errors import GraderError
from autograder.host.repo import Course
from autograder.host.results import FAILED, MANUAL, PASSED
from autograder.notebooks.cells import ANSWER, GIVEN, WRITTEN, parse_cells
from autograder.notebooks.exercise import load_exercise, notebook_ids
from autograder.notebooks.extract import MARKER, extract, written_questions
from autograder.notebooks.grade import grade_notebook
from autograder.notebooks.record import GRADEBOOK, record_grading
from autograder.notebooks.release import leaks, release_notebook
from test_adversarial import needs_docker

NB = "s00_roofline"
AUTO_POINTS = 9  # 6 public + 3 hidden (solutions/notebooks/s00_roofline/tests, hidden)


def _solved(source: str) -> str:
    """A solution region as a student writes it: the markers gone."""
    return "\n".join(line for line in source.splitlines() if not MARKER.match(line))


def _filled(released: Path, out: Path, repo_course, *, broken: str = "") -> Path:
    """The released notebook with every answer cell holding the source's answer (`broken`: that
    cell's answer with a syntax error appended)."""
    answers = {c.grade_id: _solved(c.source) for c in load_exercise(repo_course, NB).source_cells()
               if c.role in (ANSWER, WRITTEN)}
    notebook = json.loads(released.read_text())
    for cell in notebook["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id] + ("\ndef broken(:\n" if grade_id == broken else "")
    out.write_text(json.dumps(notebook))
    return out


@pytest.fixture(scope="module")
def released(repo_course, tmp_path_factory) -> Path:
    return release_notebook(course=repo_course, exercise_id=NB, out=tmp_path_factory.mktemp("release"))


@pytest.fixture(scope="module")
def filled_grading(repo_course, released, tmp_path_factory):
    notebook = _filled(released, tmp_path_factory.mktemp("ada") / f"{NB}.ipynb", repo_course)
    return grade_notebook(course=repo_course, exercise_id=NB, notebook=notebook, hardware="cpu")


def test_both_notebook_exercises_are_found(repo_course):
    assert {"s00_roofline", "s05_kvpolicy"} <= set(notebook_ids(repo_course))


def test_the_release_strips_every_solution(repo_course, released):
    text = released.read_text()
    source = load_exercise(repo_course, NB).source_cells()
    assert leaks(parse_cells(text, released.name), source) == []
    assert "BEGIN SOLUTION" not in text and "return peak_flops / mem_bw" not in text
    assert "H100 ridge is 989e12" not in text  # the written answer's reference
    cells = {c.grade_id: c for c in parse_cells(text, released.name)}
    assert "raise NotImplementedError()" in cells["roofline_ceiling"].source
    assert "def ridge_point(peak_flops: float, mem_bw: float) -> float:" in cells["roofline_ceiling"].source
    assert cells["decode_batch"].source.strip() == "YOUR ANSWER HERE"


def test_a_filled_notebook_earns_every_automatic_point_and_its_written_cell_is_pending(filled_grading):
    result = filled_grading.result
    auto = [t for t in result.tests if t.status != MANUAL]
    assert [t.status for t in auto] == [PASSED] * len(auto) and len(auto) == 7
    assert result.score == pytest.approx(AUTO_POINTS)
    [written] = result.pending
    assert written.test.nodeid == "answers/decode_batch.md::written" and written.test.points == 2
    assert "H100 ridge is 989e12" in written.output  # the instructor sees the student's text


def test_the_written_cell_goes_to_the_gradebook_pending_then_takes_the_instructors_points(
        repo_course, filled_grading, tmp_path):
    record_grading(grading=filled_grading, student="ada", out=tmp_path)
    with Gradebook(tmp_path / GRADEBOOK) as book:
        row = book.row("ada", NB)
        assert row["status"] == GRADED and row["score"] == pytest.approx(AUTO_POINTS)
        written = [o for o in book.outcomes(row["id"]) if o.nodeid.endswith("::written")]
        assert [(o.status, o.points) for o in written] == [(MANUAL, 2)]
        assert book.manual(row) == {}
    args = ["--root", str(repo_course.root), "gradebook", "manual", NB, "ada", "decode_batch", "1.5",
            "--comment", "ridge right, H200 batch missing", "--out", str(tmp_path)]
    run = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert run.exit_code == 0, run.output
    with Gradebook(tmp_path / GRADEBOOK) as book:
        entered = book.manual(book.row("ada", NB))["decode_batch"]
        assert (entered["points"], entered["max_points"]) == (1.5, 2)


def test_the_unfilled_release_earns_no_automatic_point(repo_course, released):
    result = grade_notebook(course=repo_course, exercise_id=NB, notebook=released, hardware="cpu").result
    auto = [t for t in result.tests if not t.test.nodeid.endswith("::written")]
    assert len(auto) == 7 and all(t.status == FAILED for t in auto)
    assert result.score == 0
    assert "NotImplementedError" in next(t for t in auto if "ridge_point" in t.test.nodeid).reason
    [written] = [t for t in result.tests if t.test.nodeid.endswith("::written")]
    assert written.status == FAILED and "no answer written" in written.reason  # the placeholder is no answer


def test_a_cell_that_does_not_compile_is_named_and_the_other_cells_still_earn(repo_course, released, tmp_path):
    notebook = _filled(released, tmp_path / f"{NB}.ipynb", repo_course, broken="gemm_shapes")
    result = grade_notebook(course=repo_course, exercise_id=NB, notebook=notebook, hardware="cpu").result
    assert any("cell 'gemm_shapes' does not compile" in n and "SyntaxError" in n for n in result.notes)
    by_name = {t.test.nodeid.split("::")[-1]: t for t in result.tests}
    assert by_name["test_ridge_point_is_peak_over_bandwidth"].status == PASSED
    assert by_name["test_attainable_flops_follows_the_lower_roof"].status == PASSED
    assert by_name["test_gemm_intensity_counts_two_flops_per_multiply_add"].status == FAILED
    assert result.score == pytest.approx(3)  # ridge (1) + attainable (2): nothing of the broken cell


def test_a_file_that_is_not_a_notebook_still_gets_a_complete_result(repo_course, tmp_path):
    garbage = tmp_path / "alice.ipynb"
    garbage.write_text("print('hello')\n")
    result = grade_notebook(course=repo_course, exercise_id=NB, notebook=garbage, hardware="cpu").result
    assert any("alice.ipynb is not a readable notebook" in n for n in result.notes)
    assert len(result.tests) == 8 and result.score == 0  # 7 tests and the written answer, all failed
    assert all(t.status == FAILED for t in result.tests)


def test_extraction_takes_given_cells_from_the_source_and_answers_from_the_student(repo_course):
    source = load_exercise(repo_course, NB).source_cells()
    student = [c if c.role != GIVEN else type(c)(c.grade_id, GIVEN, "H100_MEM_BW = 1e99") for c in source]
    extracted = extract(source, student)
    assert "H100_MEM_BW = 3.35e12" in extracted.module and "1e99" not in extracted.module
    assert "### BEGIN SOLUTION" in extracted.module  # the student's text as written (here: the source's)
    assert "# BEGIN SOLUTION" in extract(source, None).module  # the reference, stubbable like a package
    missing = extract(source, [c for c in source if c.grade_id != "gemm_shapes"])
    assert any("answer cell 'gemm_shapes' is missing" in n for n in missing.notes)


def test_written_questions_come_from_the_notebook(repo_course):
    [question] = written_questions(load_exercise(repo_course, NB).source_cells())
    assert (question.id, question.points) == ("decode_batch", 2.0)
    assert "cross the H100's ridge point" in question.question


def test_what_is_not_a_notebook_is_a_clear_error(tmp_path):
    with pytest.raises(GraderError, match="not a readable notebook"):
        parse_cells("{not json", "ada.ipynb")
    with pytest.raises(GraderError, match="not a readable notebook"):
        parse_cells('{"cells": 3}', "ada.ipynb")
    with pytest.raises(GraderError, match="unknown notebook exercise 'nope'"):
        load_exercise(Course(tmp_path), "nope")



@needs_docker
def test_a_filled_notebook_grades_in_a_container_as_it_does_outside(repo_course, released, filled_grading, tmp_path):
    notebook = _filled(released, tmp_path / f"{NB}.ipynb", repo_course)
    inside = grade_notebook(course=repo_course, exercise_id=NB, notebook=notebook, sandbox="docker", hardware="cpu")
    outside = {t.test.nodeid: t.status for t in filled_grading.result.tests}
    assert {t.test.nodeid: t.status for t in inside.result.tests} == outside
    auto = [t for t in inside.result.tests if not t.test.nodeid.endswith("::written")]
    assert auto and all(t.status == PASSED for t in auto), [(t.test.nodeid, t.reason) for t in auto if t.status != PASSED]
