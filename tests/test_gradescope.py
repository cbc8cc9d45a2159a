"""The Gradescope package: `autograder gradescope <id>` builds the zip; unpacked into a folder laid
out like Gradescope's /autograder, its run_autograder grades a submission into results.json, where
tests this machine cannot grade and written answers awaiting an instructor are neutral, never failed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.authoring.stubs import write_assignment
from autograder.host.fingerprint import grader_version

ANSWER = "# median (3 points)\n> Why?\n\n<!-- BEGIN SOLUTION -->\nThe median ignores one outlier; the mean moves.\n" \
         "<!-- END SOLUTION -->\n"


@pytest.fixture
def course(demo_course):
    """The demo course with one written question (3 points, graded by an instructor)."""
    sol = demo_course.solutions / "s00_demo"
    with open(sol / "assignment.toml", "a") as fh:
        fh.write('\n[[written]]\nid = "median"\npoints = 3\nquestion = "Why?"\n')
    (sol / "answers").mkdir()
    (sol / "answers" / "median.md").write_text(ANSWER)
    write_assignment(demo_course, "s00_demo")
    return demo_course


def _build(course, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "--root", str(course.root), "gradescope", "s00_demo",
                           "--out", str(out)], capture_output=True, text=True, check=False)


def test_the_zip_grades_a_submission_the_way_gradescope_runs_it(course, tmp_path):
    zip_path = tmp_path / "s00_demo.zip"
    build = _build(course, zip_path)
    assert build.returncode == 0, build.stdout + build.stderr
    with zipfile.ZipFile(zip_path) as zf:
        names = set(zf.namelist())
        assert {"setup.sh", "run_autograder", "requirements.txt"} <= names
        assert zf.getinfo("run_autograder").external_attr >> 16 & 0o111  # executable once unpacked
        assert "solutions/s00_demo/hidden/test_ops_hidden.py" in names  # the hidden tests grade there
        ops = zf.read("solutions/s00_demo/demo/ops.py").decode()
        assert "return a + b" not in ops and "NotImplementedError" in ops  # the reference never ships
        assert "The median ignores" not in zf.read("solutions/s00_demo/answers/median.md").decode()
        assert not any(n.startswith("datasets/") for n in names)  # the demo's tests load no course data
        requirements = zf.read("requirements.txt").decode().split()
        setup = zf.read("setup.sh").decode()
    assert any(r.startswith("torch==") for r in requirements) and all("==" in r for r in requirements)
    torch_pin = next(r for r in requirements if r.startswith("torch=="))
    assert f'"{torch_pin}"' in setup and "download.pytorch.org/whl/cpu" in setup
    assert subprocess.run(["bash", "-n", "-c", setup], check=False).returncode == 0

    # /autograder as Gradescope lays it out: source/ (the zip), submission/, results/
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    run_script = root / "run_autograder"
    shutil.copy(root / "source" / "run_autograder", run_script)
    run_script.chmod(0o755)
    nested = root / "submission" / "my-work" / "s00_demo"  # submitted one folder deeper
    shutil.copytree(course.solutions / "s00_demo" / "demo", nested / "demo")
    shutil.copytree(course.solutions / "s00_demo" / "answers", nested / "answers")
    (root / "results").mkdir()
    env = os.environ | {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    env.pop("COURSE_ROOT", None)
    where = subprocess.run([sys.executable, "-c", "import autograder; print(autograder.__file__)"],
                           cwd=root / "source", env=env | {"PYTHONPATH": str(root / "source")},
                           capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(root / "source")  # the zip's grader runs, not this checkout's
    run = subprocess.run([str(run_script)], env=env, capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == pytest.approx(11.0)  # every CPU point; the written answer is pending
    for suffix, note in [("::test_add_on_gpu_tensors", "NOT GRADED HERE"), ("answers/median.md::written", "PENDING")]:
        row = next(t for t in results["tests"] if t["name"].endswith(suffix))
        assert "status" not in row and "score" not in row and "max_score" not in row, row
        assert row["output"].startswith(note)
    assert {t.get("status") for t in results["tests"]} == {"passed", None}  # nothing shown as failed
    meta = results["extra_data"]["autograder"]["assignments"]["s00_demo"]
    assert meta["grader_version"] == grader_version(course, "s00_demo")  # mergeable with a GPU runner's result


def test_no_package_in_the_submission_is_a_zero_that_says_why(course, tmp_path):
    zip_path = tmp_path / "s00_demo.zip"
    assert _build(course, zip_path).returncode == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    (root / "submission").mkdir(parents=True)
    (root / "submission" / "ops.py").write_text("def add(a, b):\n    return a + b\n")
    env = os.environ | {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    run = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                         check=False, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and "no folder demo/ with an __init__.py" in results["output"]
    assert results["extra_data"]["autograder"]["problem"] == "no_package"

    # a grader that cannot grade (here: a spec it cannot read) writes no results: Gradescope then
    # reports a failed autograder run, not a zero
    (root / "results" / "results.json").unlink()
    (root / "source" / "solutions" / "s00_demo" / "assignment.toml").write_text("[assignment\n")
    broken = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                            text=True, check=False, timeout=120)
    assert broken.returncode != 0 and not (root / "results" / "results.json").exists()


def test_make_gradescope_builds_the_zip(demo_course, tmp_path):
    repo = Path(__file__).resolve().parent.parent
    stamp = list((repo / ".venv").glob(".installed-*"))
    if not stamp:
        pytest.skip("the course's venv is not set up (make setup)")
    out = tmp_path / "gs.zip"
    run = subprocess.run(["make", "-s", "-C", str(repo), "gradescope", "A=s00_demo", f"GRADESCOPE_ZIP={out}"],
                         env=os.environ | {"COURSE_ROOT": str(demo_course.root)}, capture_output=True, text=True,
                         check=False, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    with zipfile.ZipFile(out) as zf:
        assert "gradescope-run s00_demo" in zf.read("run_autograder").decode()
    missing = subprocess.run(["make", "-s", "-C", str(repo), "gradescope"], capture_output=True, text=True, check=False)
    assert missing.returncode != 0 and "usage: make gradescope A=<id>" in missing.stdout
