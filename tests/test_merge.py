"""`autograder merge`: a CPU grading and a GPU-runner grading of one submission become one grade,
each test taken from the run that graded it; results of different submissions, grader versions or
with a test graded differently are refused."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys

import pytest

from autograder.classroom.merge import MergeError, merge_results


def _cli(course, *args):
    """No CUDA device is visible, on a GPU machine too: the grades below are those of a CPU host."""
    return subprocess.run([sys.executable, "-m", "autograder", "--root", str(course.root), *args],
                          capture_output=True, text=True, check=False, env=os.environ | {"CUDA_VISIBLE_DEVICES": ""})


def _results(hardware: str, statuses: dict[str, tuple[str, float]], sub: str = "h1", version: str = "v1") -> dict:
    tests = [{"name": f"s00_demo: {name}", "score": score, "max_score": 1.0, "status": "passed",
              "extra_data": {"status": status}} for name, (status, score) in statuses.items()]
    meta = {"s00_demo": {"submission_hash": sub, "grader_version": version, "hardware": hardware}}
    return {"score": sum(t["score"] for t in tests), "output": hardware, "tests": tests,
            "extra_data": {"autograder": {"assignments": meta}}}


CPU = _results("cpu", {"t_cpu": ("passed", 1.0), "t_gpu": ("not_graded", 0.0)})
GPU = _results("h200", {"t_cpu": ("passed", 1.0), "t_gpu": ("failed", 0.0)})


def test_each_test_comes_from_the_run_that_graded_it():
    merged = merge_results(CPU, GPU)
    statuses = {t["name"]: t["extra_data"]["status"] for t in merged["tests"]}
    assert statuses == {"s00_demo: t_cpu": "passed", "s00_demo: t_gpu": "failed"}
    assert merged["extra_data"]["autograder"]["assignments"]["s00_demo"]["hardware"] == "cpu+h200"
    assert merged["output"].startswith("merged: 0 tests graded only in A, 1 only in B, 1 in both")


@pytest.mark.parametrize("change, message", [
    (lambda g: g["extra_data"]["autograder"]["assignments"]["s00_demo"].update(submission_hash="h2"),
     "different submission hash"),
    (lambda g: g["extra_data"]["autograder"]["assignments"]["s00_demo"].update(grader_version="v2"),
     "different grader version"),
    (lambda g: g["tests"][0]["extra_data"].update(status="failed"), "graded by both with different outcomes"),
    (lambda g: g["tests"].pop(), "different tests"),
    (lambda g: g["extra_data"].pop("autograder"), "says nothing of what it graded"),
    (lambda g: g["extra_data"].update(grading_failed=True), "a failed grading"),
])
def test_results_that_are_not_one_gradings_halves_are_refused(change, message):
    other = copy.deepcopy(GPU)
    change(other)
    with pytest.raises(MergeError, match=message):
        merge_results(CPU, other)


def test_a_cpu_grading_and_a_gpu_tagged_grading_of_the_reference_merge_into_one_grade(demo_course, tmp_path):
    """Two real gradings of the same package: a submission one folder deeper on `cpu` (the perf
    test is graded, a bar exists; the GPU test is not graded here) and the reference tagged `h100`
    on this machine (neither is: no bar for h100, no CUDA)."""
    nested = tmp_path / "sub" / "s00_demo"  # the reference's package, submitted one folder deeper
    shutil.copytree(demo_course.solutions / "s00_demo" / "demo", nested / "demo")
    runs = {tag: _cli(demo_course, "grade", "s00_demo", *source, "--sandbox", "none", "--hardware", tag,
                      "--json", str(tmp_path / f"{tag}.json"))
            for tag, source in [("cpu", ["--submission", str(tmp_path / "sub")]), ("h100", ["--solution"])]}
    assert all(run.returncode == 0 for run in runs.values()), [run.stdout + run.stderr for run in runs.values()]
    assert "holding the package" in " ".join(runs["cpu"].stdout.split())
    cpu = json.loads((tmp_path / "cpu.json").read_text())
    gpu_row = next(t for t in cpu["tests"] if t["name"].endswith("test_add_on_gpu_tensors"))
    assert "status" not in gpu_row and gpu_row["output"].startswith("NOT GRADED HERE")  # neutral, not failed
    run = _cli(demo_course, "merge", str(tmp_path / "cpu.json"), str(tmp_path / "h100.json"),
               "-o", str(tmp_path / "merged.json"))
    assert run.returncode == 0, run.stdout + run.stderr
    merged = json.loads((tmp_path / "merged.json").read_text())
    rows = {t["name"].split("::")[-1]: t for t in merged["tests"]}
    assert json.loads((tmp_path / "h100.json").read_text())["score"] == pytest.approx(8.0)
    assert rows["test_add_speed_ratio_is_recorded"]["score"] == 3.0  # from the cpu run (75% of 4)
    assert "status" not in rows["test_add_on_gpu_tensors"]           # graded by neither: still neutral
    assert merged["score"] == pytest.approx(11.0) and len(merged["tests"]) == 7
    assert merged["output"].startswith("merged: 1 tests graded only in cpu.json, 0 only in h100.json, 5 in both")
    cpu["extra_data"]["autograder"]["assignments"]["s00_demo"]["submission_hash"] = "0" * 64  # another submission
    (tmp_path / "other.json").write_text(json.dumps(cpu))
    refused = _cli(demo_course, "merge", str(tmp_path / "other.json"), str(tmp_path / "h100.json"),
                   "-o", str(tmp_path / "bad.json"))
    assert refused.returncode == 2 and "different submission hash" in refused.stdout
    assert not (tmp_path / "bad.json").exists()
