"""Submissions and set-ups that once fooled or broke the grader, graded end to end on the demo course:
links into the reference, rich markup in error messages, a missing folder or file, a syntax error,
a hang at import time and a sandbox in which the grader itself cannot start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from rich.console import Console

import autograder.host.runs as runs_module
from autograder.host import report, result_files
from autograder.errors import GraderError
from autograder.host.grade import grade_assignment
from autograder.sandbox.bwrap import BwrapBackend

needs_bwrap = pytest.mark.skipif(not BwrapBackend().available()[0], reason="bwrap unavailable (CI installs it)")
from test_adversarial import needs_docker, roomy_in_containers  # noqa: E402  (one probe of the engine)
MEAN = '''
def mean(xs):
    if not xs:
        raise ValueError("empty")
    return sum(xs) / len(xs)
'''
MEAN_POINTS = 5.0  # test_mean_matches_fsum twice (1 + 1) and the hidden empty-list test (3)


def _submission(tmp_path: Path, demo_course, ops: str | None) -> Path:
    """The stub with `demo/ops.py` replaced by `ops` (deleted when None)."""
    sub = tmp_path / "submission"
    shutil.copytree(demo_course.assignments / "s00_demo", sub)
    if ops is None:
        (sub / "demo" / "ops.py").unlink()
    else:
        (sub / "demo" / "ops.py").write_text(textwrap.dedent(ops))
    return sub


def _grade(demo_course, sub: Path, sandbox: str = "none", **kw):
    roomy_in_containers(demo_course, sandbox)
    result = grade_assignment(course=demo_course, assignment_id="s00_demo", submission=sub, sandbox=sandbox,
                              hardware="cpu", **kw)
    assert len(result.tests) == 7, "grading must always yield one result per expected test"
    return result


def _printed(result) -> str:
    console = Console(width=200, record=True)
    report.print_result(result, console)
    return console.export_text()


def _cli(demo_course, *args: str) -> subprocess.CompletedProcess:
    base = [sys.executable, "-m", "autograder", "--root", str(demo_course.root), "grade", "s00_demo",
            "--sandbox", "none", "--hardware", "cpu"]
    env = os.environ | {"COLUMNS": "250"}  # wide enough that no reason is folded
    return subprocess.run(base + list(args), capture_output=True, text=True, timeout=600, env=env, check=False)


@pytest.mark.parametrize("linked", ["demo/ops.py", "demo"])
def test_links_into_the_reference_are_refused_and_the_stub_graded(demo_course, tmp_path, linked):
    sub = _submission(tmp_path, demo_course, "")
    target = sub / linked
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    target.symlink_to(demo_course.solutions / "s00_demo" / linked)
    result = _grade(demo_course, sub)
    kind = "folder" if linked == "demo" else "file"
    note = f"{linked} is a symbolic link; submit the {kind} itself"
    assert result.score == 0
    assert any(n.startswith(note) for n in result.notes), result.notes
    assert note in _printed(result) and note in result_files.gradescope([result])["output"]


def test_rich_markup_in_an_error_message_neither_crashes_the_report_nor_loses_points(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, 'def add(a, b):\n    raise ValueError("odd [/] and [bold] text")\n'
                      + MEAN)
    out = tmp_path / "results.json"
    run = _cli(demo_course, "--submission", str(sub), "--json", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(out.read_text())
    assert data["score"] == pytest.approx(MEAN_POINTS) and len(data["tests"]) == 7
    assert "odd [/] and [bold] text" in run.stdout


def test_a_missing_submission_folder_still_writes_results_json(demo_course, tmp_path):
    out = tmp_path / "results.json"
    run = _cli(demo_course, "--submission", str(tmp_path / "nowhere"), "--json", str(out))
    assert run.returncode == 2 and "does not exist" in run.stdout
    data = json.loads(out.read_text())
    assert data["score"] == 0 and data["tests"] == []
    assert "grading failed" in data["output"] and "nowhere does not exist" in data["output"]


@needs_bwrap
def test_a_sandbox_without_the_grader_is_a_grader_error_not_a_student_zero(demo_course, tmp_path, monkeypatch):
    original = runs_module._exposed

    def without_the_grader(course):
        hide, expose = original(course)
        return hide, tuple(p for p in expose if p.name != "autograder")  # the plugin cannot be imported

    monkeypatch.setattr(runs_module, "_exposed", without_the_grader)
    sub = _submission(tmp_path, demo_course, "def add(a, b):\n    return a + b\n" + MEAN)
    with pytest.raises(GraderError, match="grader set-up error, not the submission's fault") as error:
        _grade(demo_course, sub, sandbox="bwrap")
    assert "No module named 'autograder'" in str(error.value)


def test_a_syntax_error_is_shown_once_first_and_named_in_each_test(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, "def add(a, b)\n    return a + b\n" + MEAN)
    result = _grade(demo_course, sub)
    first = "the package does not import: SyntaxError in demo/ops.py line 1"
    assert result.score == 0 and result.notes[0].startswith(first), result.notes
    graded = [t for t in result.tests if t.status != "not_graded"]
    assert graded and all(t.reason.startswith(first) for t in graded), [t.reason for t in result.tests]
    assert result_files.gradescope([result])["output"].count(first) == 1


@pytest.mark.parametrize("sandbox", ["none", pytest.param("bwrap", marks=needs_bwrap),
                                     pytest.param("docker", marks=needs_docker)])
def test_a_hang_at_import_fails_every_test_fast(demo_course, tmp_path, sandbox):
    sub = _submission(tmp_path, demo_course, "while True:\n    pass\n" + MEAN)
    start = time.monotonic()
    result = _grade(demo_course, sub, sandbox=sandbox, import_timeout_s=3)
    assert time.monotonic() - start < 60  # each file would otherwise run to its 25 s wall limit, twice
    reason = "importing the package did not finish within 3 s"
    assert result.score == 0 and all(t.status == "failed" and t.reason.startswith(reason) for t in result.tests)
    assert result.notes[0].startswith(reason)


def test_a_deleted_file_is_named_and_the_stub_graded_in_its_place(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, None)
    result = _grade(demo_course, sub)
    note = "demo/ops.py is missing from the submission: the untouched stub was graded in its place"
    assert result.score == 0 and note in result.notes
    assert note in _printed(result) and note in result_files.gradescope([result])["output"]


def test_a_deleted_init_still_grades_the_rest_with_a_note(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, "def add(a, b):\n    return a + b\n" + MEAN)
    os.unlink(sub / "demo" / "__init__.py")
    result = _grade(demo_course, sub)
    assert result.score == pytest.approx(11.0)  # the stub's __init__ only re-exports: nothing lost
    assert "demo/__init__.py is missing from the submission: the untouched stub was graded in its place" in result.notes
