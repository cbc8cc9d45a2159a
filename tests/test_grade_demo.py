"""End to end on the demo course: the reference, the stub, and the report of a whole run."""

import json
import subprocess
import sys

import pytest

from autograder.host.grade import grade_assignment
from autograder.sandbox.bwrap import BwrapBackend

BACKENDS = ["none", pytest.param("bwrap", marks=pytest.mark.skipif(not BwrapBackend().available()[0],
                                                                   reason="bwrap unavailable"))]


@pytest.mark.parametrize("sandbox", BACKENDS)
def test_reference_earns_every_cpu_point_and_gpu_test_is_not_graded_here(demo_course, sandbox):
    result = grade_assignment(course=demo_course, assignment_id="s00_demo", solution=True, sandbox=sandbox,
                              hardware="cpu")
    statuses = {t.test.nodeid.split("::")[1]: t.status for t in result.tests}
    assert statuses["test_add_on_gpu_tensors"] == "not_graded"
    assert len(result.tests) == 7 and result.score == pytest.approx(11.0)  # perf: 1.5 between 1 and 2 -> 75% of 4
    assert result.max_score == pytest.approx(12.0)


def test_untouched_stub_earns_nothing(demo_course):
    result = grade_assignment(course=demo_course, assignment_id="s00_demo", sandbox="none", hardware="cpu")
    assert result.score == 0 and len(result.tests) == 7
    assert all(t.status in ("failed", "not_graded") for t in result.tests)


def test_perf_without_a_bar_for_this_hardware_is_not_graded(demo_course):
    result = grade_assignment(course=demo_course, assignment_id="s00_demo", solution=True, sandbox="none",
                              hardware="h100")
    perf = next(t for t in result.tests if t.test.perf)
    assert perf.status == "not_graded" and "no perf threshold for hardware 'h100'" in perf.reason


def test_cli_writes_all_reports_and_rejects_unknown_ids(demo_course, tmp_path):
    base = [sys.executable, "-m", "autograder", "--root", str(demo_course.root)]
    out = tmp_path / "out"
    run = subprocess.run(base + ["grade", "s00_demo", "--solution", "--sandbox", "none", "--hardware", "cpu",
                                 "--json", str(out / "r.json"), "--junit", str(out / "j.xml"),
                                 "--markdown", str(out / "s.md")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((out / "r.json").read_text())["score"] == pytest.approx(11.0)
    assert "s00_demo" in (out / "s.md").read_text() and (out / "j.xml").is_file()
    bad = subprocess.run(base + ["grade", "s99_nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown assignment 's99_nope'" in bad.stdout
    assert len(bad.stdout.strip().splitlines()) == 1


def test_stub_check_fails_on_a_stale_tree(demo_course):
    (demo_course.assignments / "s00_demo" / "demo" / "ops.py").write_text("# edited\n")
    run = subprocess.run([sys.executable, "-m", "autograder", "--root", str(demo_course.root), "stubs", "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "out of date" in run.stdout
