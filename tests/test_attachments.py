"""Perf tests may attach PNG figures (`perf.attach`): the judge writes them beside the run and signs
their digests, the grader keeps only files that still match, and the reports list them.

The course under test: the demo course plus `s00_figs`, graded once (module scope) through the
command line with a submission whose `scribble()` overwrites, removes and replaces by a link the
attachments of the test that calls it. One of its tests draws P1's bench figure (bench_plot.py, copied
in as a support file) the way P1's GPU perf test does, so that code path runs on a CPU too."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder.cli import cli
from autograder.host import attachments
from autograder.host.course_files import ignore
from autograder.host.repo import Course
from autograder.host.results import AssignmentResult, Attachment, ExpectedTest, TestResult
from autograder.judge.perf import Perf, write_new
from autograder.protocol.attachments import MAX_BYTES, MAX_PER_TEST, PNG_SIGNATURE
from conftest import FIXTURES, REPO, add_assignment

TOML = """[assignment]
id = "s00_figs"
title = "Figures attached by perf tests"
stage = 0
package = "figs"
editable = ["figs/*.py"]

[limits]
test_timeout_s = 60
file_timeout_s = 180
memory_mb = 6144

[perf.figs_ratio]
description = "a made-up ratio"
unit = "x"
better = "higher"
[perf.figs_ratio.thresholds]
cpu = { pass = 1.0, full = 2.0, env = "student-cpu" }
"""

OPS = '''"""What the tests call."""


def double(x: float) -> float:
    """2 x."""
    # BEGIN SOLUTION
    return 2 * x
    # END SOLUTION


def scribble() -> int:
    """Nothing in the reference; the submission tampers with the attachments (see the tests)."""
    # BEGIN SOLUTION
    return 0
    # END SOLUTION
'''

SCRIBBLE = '''

def scribble() -> int:
    """Tamper with the judge's files: overwrite one, remove one, replace one by a link; how many."""
    import glob
    import os

    count = 0
    for path in glob.glob(".attachments/*-victim.png"):
        with open(path, "wb") as f:
            f.write(b"\\x89PNG\\r\\n\\x1a\\n forged")
        count += 1
    for path in glob.glob(".attachments/*-gone.png"):
        os.remove(path)
        count += 1
    for path in glob.glob(".attachments/*-linked.png"):
        os.remove(path)
        os.symlink("/etc/hostname", path)
        count += 1
    return count
'''

TESTS = '''import pytest
from bench_plot import BenchRun, figure, latencies
from matplotlib.figure import Figure

from figs import double, scribble


def small_figure():
    fig = Figure(figsize=(3, 2))
    fig.subplots().plot([1, 2, 3], [double(1), double(2), double(3)])
    return fig


class Output:
    """Stands in for LLM.generate's RequestOutput (P1's GPU test passes the engine's own)."""

    def __init__(self, ttft, tpot):
        self.metrics = type("Metrics", (), {"ttft": ttft})()
        self._tpot = tpot

    def tpot(self):
        return self._tpot


@pytest.mark.perf
def test_attaches_a_figure(perf):
    perf.attach("curve", small_figure())
    perf.record("figs_ratio", 2.0)


@pytest.mark.perf
def test_attaches_the_p1_bench_figure(perf):
    ttft, tpot = latencies([Output(0.05 * i, 0.01 + 0.001 * i) for i in range(1, 17)])
    perf.attach("throughput_latency", figure(BenchRun(
        hardware="a CPU", settings="16 made-up requests", engine_tok_s=900.0, ttft_s=ttft, tpot_s=tpot,
        hf_tok_s=300.0, hf_label="HF generate (static batches of 4)")))
    perf.record("figs_ratio", 2.0)


@pytest.mark.perf
def test_the_submission_tampers_with_its_attachments(perf):
    for name in ("victim", "gone", "linked"):
        perf.attach(name, small_figure())
    assert scribble() == 3
    perf.record("figs_ratio", 2.0)


@pytest.mark.perf
def test_a_bad_name(perf):
    perf.attach("Bad Name!", small_figure())


@pytest.mark.perf
def test_bytes_that_are_no_png(perf):
    perf.attach("gif", b"GIF89a not a png")


def test_a_plain_test_after_them():
    assert double(4) == 8
'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    """One CLI grading of a tampering submission: {"out": folder, "json", "summary", "stdout", "tests"}."""
    base = tmp_path_factory.mktemp("attachments")
    course = Course(base / "course")
    shutil.copytree(FIXTURES / "demo_course", course.root, ignore=ignore())
    add_assignment(course, "s00_figs", {
        "assignment.toml": TOML, "figs/__init__.py": "from figs.ops import double, scribble\n",
        "figs/ops.py": OPS, "tests/test_figs.py": TESTS,
        "bench_plot.py": (REPO / "solutions" / "p1_minivllm" / "bench_plot.py").read_text()})
    sub = base / "submission" / "figs"
    sub.mkdir(parents=True)
    (sub / "__init__.py").write_text("from figs.ops import double, scribble\n")
    (sub / "ops.py").write_text('def double(x):\n    return 2 * x\n' + SCRIBBLE)
    out = base / "out"
    run = CliRunner().invoke(cli, ["--root", str(course.root), "grade", "s00_figs", "--submission", str(sub.parent),
                                   "--sandbox", "none", "--hardware", "cpu", "--json", str(out / "results.json"),
                                   "--markdown", str(out / "summary.md")], catch_exceptions=False)
    assert run.exit_code == 0, run.output
    data = json.loads((out / "results.json").read_text())
    tests = {t["name"].split("::")[-1]: t for t in data["tests"]}
    return {"out": out, "json": data, "summary": (out / "summary.md").read_text(), "stdout": run.output,
            "tests": tests}


def _attachments(graded: dict, test: str) -> dict[str, dict]:
    return {a["name"]: a for a in graded["tests"][test]["extra_data"].get("attachments", [])}


def test_an_attached_figure_lands_in_the_results_and_the_reports_list_it(graded):
    curve = _attachments(graded, "test_attaches_a_figure")["curve"]
    path = graded["out"] / "figures" / "s00_figs" / "tests.test_figs.test_attaches_a_figure--curve.png"
    assert curve["path"] == str(path) and curve["problem"] == ""
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and hashlib.sha256(data).hexdigest() == curve["sha256"]
    assert graded["tests"]["test_attaches_a_figure"]["extra_data"]["status"] == "passed"
    link = "figures/s00_figs/tests.test_figs.test_attaches_a_figure--curve.png"
    assert f"`tests/test_figs.py::test_attaches_a_figure` curve: [{link}]({link})" in graded["summary"]
    assert "curve -> " in graded["stdout"] and "test_attaches_a_figure--curve.png" in graded["stdout"]


def test_p1s_bench_figure_is_drawn_and_attached_in_the_judge(graded):
    bench = _attachments(graded, "test_attaches_the_p1_bench_figure")["throughput_latency"]
    assert bench["problem"] == "" and Path(bench["path"]).read_bytes().startswith(PNG_SIGNATURE)
    assert graded["tests"]["test_attaches_the_p1_bench_figure"]["extra_data"]["status"] == "passed"


def test_attachments_the_submission_tampered_with_are_not_copied_and_are_reported(graded):
    found = _attachments(graded, "test_the_submission_tampers_with_its_attachments")
    assert "forged or overwritten" in found["victim"]["problem"]
    assert "removed" in found["gone"]["problem"] and "link" in found["linked"]["problem"]
    assert all(a["path"] == "" for a in found.values())
    assert not list((graded["out"] / "figures" / "s00_figs").glob("*tampers*"))
    tampered = graded["tests"]["test_the_submission_tampers_with_its_attachments"]
    assert tampered["extra_data"]["status"] == "passed", tampered["output"]
    assert "attachment 'victim' not kept" in graded["json"]["output"]
    assert "figure victim: not kept: its bytes changed" in tampered["output"]  # under the test on Gradescope
    assert "victim" in graded["summary"] and "forged or overwritten" in graded["summary"]


def test_a_bad_name_or_non_png_bytes_fail_that_test_only_with_a_clear_reason(graded):
    bad, gif = graded["tests"]["test_a_bad_name"], graded["tests"]["test_bytes_that_are_no_png"]
    assert bad["extra_data"]["status"] == "failed" and "perf.attach: the name must be" in bad["output"]
    assert gif["extra_data"]["status"] == "failed" and "perf.attach: not PNG bytes" in gif["output"]
    others = [t for name, t in graded["tests"].items() if name not in ("test_a_bad_name", "test_bytes_that_are_no_png")]
    assert [t["extra_data"]["status"] for t in others] == ["passed"] * 4


def test_attach_checks_what_it_is_given_before_writing_anything(tmp_path):
    attached: list[dict] = []
    perf = Perf({}, attached, nodeid="t.py::t", folder=tmp_path)
    png = PNG_SIGNATURE + b"rest"
    with pytest.raises(ValueError, match="name must be"):
        perf.attach("x" * 41, png)
    with pytest.raises(ValueError, match="over the 2 MB cap"):
        perf.attach("big", PNG_SIGNATURE + bytes(MAX_BYTES))
    with pytest.raises(TypeError, match="a matplotlib Figure or PNG bytes"):
        perf.attach("text", "not bytes")
    for n in range(MAX_PER_TEST):
        perf.attach(f"fig{n}", png)
    with pytest.raises(ValueError, match="already attached"):
        perf.attach("fig0", png)
    with pytest.raises(ValueError, match=f"at most {MAX_PER_TEST}"):
        perf.attach("one_more", png)
    assert [a["name"] for a in attached] == [f"fig{n}" for n in range(MAX_PER_TEST)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(a["file"] for a in attached)


def test_the_judge_writes_through_no_link_planted_in_its_files_place(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    folder = tmp_path / ".attachments"
    folder.mkdir()
    (folder / "f.png").symlink_to(outside)
    write_new(folder, "f.png", PNG_SIGNATURE)
    assert outside.read_text() == "keep me"
    assert not (folder / "f.png").is_symlink() and (folder / "f.png").read_bytes() == PNG_SIGNATURE
    linked = tmp_path / "linked_folder"
    linked.symlink_to(folder)
    with pytest.raises(RuntimeError, match="cannot open the attachments folder"):
        write_new(linked, "g.png", PNG_SIGNATURE)


def test_the_bench_figure_draws_without_a_baseline_or_any_tpot(monkeypatch):
    spec = importlib.util.spec_from_file_location("p1_bench_plot", REPO / "solutions" / "p1_minivllm" / "bench_plot.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "p1_bench_plot", module)  # for this test only: P1 stays off sys.path
    spec.loader.exec_module(module)
    BenchRun, figure = module.BenchRun, module.figure
    buffer = io.BytesIO()
    figure(BenchRun(hardware="cpu", settings="one request", engine_tok_s=10.0, ttft_s=[0.2])).savefig(buffer, format="png")
    assert buffer.getvalue().startswith(PNG_SIGNATURE)
    with pytest.raises(ValueError, match="throughputs must be > 0"):
        BenchRun(hardware="cpu", settings="", engine_tok_s=0.0, ttft_s=[0.1])


def test_a_new_grading_replaces_the_figures_of_the_last_one(tmp_path):
    test = ExpectedTest("hidden/test_p.py::test_t[a b]", "hidden/test_p.py", 1.0, gpu=True, perf=True)
    png = PNG_SIGNATURE + b"new"
    result = AssignmentResult("p9", "t", "h200", "none", "solution", tests=[
        TestResult(test, "passed", attachments=[Attachment("fig", hashlib.sha256(png).hexdigest(), "f.png", data=png)])])
    stale = tmp_path / "figures" / "p9" / "hidden.test_p.test_t-old--fig.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(PNG_SIGNATURE)
    attachments.save(result, attachments.figures_dir(None, str(tmp_path / "summary.md")))
    assert [p.name for p in stale.parent.iterdir()] == ["hidden.test_p.test_t-a-b--fig.png"]
    assert (stale.parent / "hidden.test_p.test_t-a-b--fig.png").read_bytes() == png
