"""Time limits count a test's own time (autograder/judge/own_time.py): on a host loaded three times
over, a test that needs less CPU than its limit passes, and a test that sleeps past its limit still
fails at its limit, not later."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder.host.judge_command import AUTOLOAD_OFF
from autograder.judge.own_time import MAX_STRETCH, Deadline, OwnTime, run_delay_s

REPO = Path(__file__).resolve().parents[1]
needs_schedstat = pytest.mark.skipif(run_delay_s(os.getpid()) is None,
                                     reason="this kernel keeps no run-queue delays (/proc/<pid>/schedstat)")


class FakeDelays:
    """Run-queue waits by pid, set by the test; a pid set to None is gone."""

    def __init__(self) -> None:
        self.now: dict[int, float | None] = {}

    def __call__(self, pid: int) -> float | None:
        return self.now.get(pid)


def test_own_time_subtracts_the_waits_of_watched_processes_and_keeps_those_of_dead_ones():
    delays = FakeDelays()
    delays.now = {1: 5.0, 2: 0.5}
    clock = OwnTime(read=delays, sample_s=3600)  # sampled by hand below
    clock.watch(1)
    clock.watch(2)
    clock.watch(3)  # the kernel keeps nothing for it: ignored
    delays.now = {1: 6.5, 2: 1.0}
    assert clock.sample() == pytest.approx(2.0)  # 1.5 + 0.5, counted from when each was first watched
    delays.now = {1: 7.0, 2: None}  # worker 2 died: what it waited while watched stays counted
    assert clock.sample() == pytest.approx(2.5)
    delays.now = {1: 7.0, 2: 100.0}  # a new process reusing pid 2 is not counted unless watched again
    assert clock.sample() == pytest.approx(2.5)


def test_a_deadline_never_stretches_past_max_stretch_times_its_limit(monkeypatch):
    delays = FakeDelays()
    delays.now = {1: 0.0}
    clock = OwnTime(read=delays, sample_s=3600)
    clock.watch(1)
    deadline = Deadline(2.0, clock)
    wall = [deadline.wall0]
    monkeypatch.setattr(time, "monotonic", lambda: wall[0])
    wall[0] += 1.0
    delays.now = {1: 0.75}  # waited 0.75 of the 1.0 s
    clock.sample()
    own, elapsed = deadline.used()
    assert (own, elapsed) == (pytest.approx(0.25), pytest.approx(1.0))
    wall[0] = deadline.wall0 + 7.0
    delays.now = {1: 6.9}  # starved almost the whole time: the cap counts wall / MAX_STRETCH
    clock.sample()
    assert deadline.used()[0] == pytest.approx(7.0 / MAX_STRETCH) and deadline.left() == pytest.approx(0.25)


@needs_schedstat
def test_the_kernel_counts_a_busy_process_waiting_on_a_loaded_host():
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3 * (os.cpu_count() or 1))]
    try:
        first = run_delay_s(hogs[0].pid)
        time.sleep(1.5)
        waited = run_delay_s(hogs[0].pid) - first
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert waited > 0.3, f"a busy process among {len(hogs)} on {os.cpu_count()} cores waited only {waited:.2f} s of 1.5 s"


TESTS = textwrap.dedent("""
    import json, os, time
    import pytest

    def _note(name, t0):
        with open(os.environ["OWN_TIME_NOTES"], "a") as f:
            f.write(json.dumps({"name": name, "wall": time.monotonic() - t0}) + "\\n")

    @pytest.mark.timeout(1.5)
    def test_needs_half_a_second_of_cpu():
        t0, cpu0 = time.monotonic(), time.process_time()
        while time.process_time() - cpu0 < 0.5:
            pass
        _note("busy", t0)

    @pytest.mark.timeout(1.5)
    def test_sleeps_past_its_limit():
        t0 = time.monotonic()
        try:
            time.sleep(10)
        finally:
            _note("sleep", t0)
""")


@needs_schedstat
def test_on_a_host_loaded_three_times_over_cpu_work_within_the_limit_passes_and_a_sleep_still_fails_on_time(tmp_path):
    (tmp_path / "test_limits.py").write_text(TESTS)
    notes = tmp_path / "notes.jsonl"
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3 * (os.cpu_count() or 1))]
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-p", "pytest_timeout", "-p", "autograder.judge.time_limit",
                              "-q", "-rA", "-p", "no:cacheprovider", str(tmp_path / "test_limits.py")], cwd=tmp_path,
                             env=os.environ | AUTOLOAD_OFF | {"OWN_TIME_NOTES": str(notes), "PYTHONPATH": str(REPO)},
                             capture_output=True, text=True, timeout=120, check=False)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    out = run.stdout + run.stderr
    wall = {n["name"]: n["wall"] for n in map(json.loads, notes.read_text().splitlines())}
    assert wall["busy"] > 1.5, f"the load did not slow the busy test past its limit (wall {wall['busy']:.2f} s): no check"
    assert "PASSED test_limits.py::test_needs_half_a_second_of_cpu" in out, out
    assert "FAILED test_limits.py::test_sleeps_past_its_limit" in out and "Timeout: the test used its limit of 1.5 s" in out
    assert wall["sleep"] < 1.5 + 1.0, f"a sleeping test stopped {wall['sleep']:.2f} s in; its limit is 1.5 s"
