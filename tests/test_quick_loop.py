"""The quick loop the student README documents: plain `python -m pytest tests` inside an assignment
folder (no judge, no worker, no points; autograder/local.py). Every reference, laid out as a student
has it (the release with the reference's package over the stubs), passes its public tests there:
GPU tests skip without a GPU, and the `ranks` fixture starts real gloo ranks. Multi-rank tests cost
a spawn of torch per rank, so one of them stands for all here (`make test` grades them all)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from autograder.host.repo import Course

COURSE = Course(REPO)
IDS = [aid for aid in COURSE.ids() if (COURSE.student_dir(aid) / "tests").is_dir()]
# `make test` leaves out the five slowest quick loops (15-40 s each on 2 cores), none of which uses a
# feature of the local plugin that another assignment's public tests do not use too (oracle, measure,
# GPU skips, kernels marks, the profiler, a server thread); `make quick-loops` runs every one.
SLOW = {"p7_specdec", "p3_gptq", "s12_architectures", "s02_parallel", "s15_posttraining"}
if os.environ.get("AUTOGRADER_ALL_QUICK_LOOPS") != "1":
    IDS = [aid for aid in IDS if aid not in SLOW]


def _as_a_student_has_it(aid: str, tmp_path: Path) -> Path:
    """assignments/<id> (stubs, given packages, public tests) with the reference's packages over the stubs."""
    folder = tmp_path / aid
    shutil.copytree(COURSE.student_dir(aid), folder)
    solution = COURSE.solution_dir(aid)
    for package in COURSE.spec(aid).packages:
        if not (solution / package).is_dir():  # a given package: the release holds its solution already
            continue
        shutil.rmtree(folder / package, ignore_errors=True)
        shutil.copytree(solution / package, folder / package)
    return folder


def _quick_loop(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | {"CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", *args],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("aid", IDS)
def test_each_reference_passes_its_public_tests_in_the_quick_loop(aid, tmp_path):
    run = _quick_loop(_as_a_student_has_it(aid, tmp_path), "-m", "not world_size")
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert run.returncode == 0, f"{aid}: {summary}\n{run.stdout[-4000:]}"
    assert "failed" not in summary and "error" not in summary, summary


def test_the_quick_loops_ranks_fixture_runs_a_collective_on_two_spawned_ranks(tmp_path):
    run = _quick_loop(_as_a_student_has_it("s03_collectives", tmp_path), "-k", "sums_in_place_on_two_ranks")
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-4000:]


def test_the_quick_loop_of_a_stub_fails_with_the_task_to_write(tmp_path):
    """The untouched release: the quick loop runs and fails, naming what is not written yet."""
    folder = tmp_path / "s05_kvcache"
    shutil.copytree(COURSE.student_dir("s05_kvcache"), folder)
    run = _quick_loop(folder, "-x")
    assert run.returncode == 1 and "NotImplementedError" in run.stdout, run.stdout[-3000:]
