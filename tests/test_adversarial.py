"""Hostile submissions: each is graded without harming the host and earns no point it did not honestly
pass. Every case replaces `demo/ops.py` of the demo assignment; `mean` stays correct unless the attack
is at import time, so the tests that only need `mean` show the rest of the file still counts."""

from __future__ import annotations

import os
import shutil
import socket
import textwrap
from pathlib import Path

import pytest
from confinement_probe import assert_forked_and_confined, findings, probe_body

import autograder.host.grade as grade_module
from autograder.host.grade import grade_assignment
from autograder.sandbox.bwrap import BwrapBackend
from autograder.sandbox.docker import DockerBackend

HAVE_BWRAP = BwrapBackend().available()[0]
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason="bwrap unavailable (CI installs bubblewrap)")
DOCKER_WHY = DockerBackend(gpu=False).available()[1]
needs_docker = pytest.mark.skipif(bool(DOCKER_WHY), reason=f"no docker sandbox here (.ci/run builds one): {DOCKER_WHY}")

MEAN = '''
def mean(xs):
    if not xs:
        raise ValueError("empty")
    return sum(xs) / len(xs)
'''
ADD_TESTS = {"test_add_small_integers", "test_forbidden_api_raises_but_oracle_lifts_it",
             "test_add_speed_ratio_is_recorded"}


def _submission(tmp_path: Path, demo_course, body: str) -> Path:
    sub = tmp_path / "submission"
    shutil.copytree(demo_course.assignments / "s00_demo", sub)
    (sub / "demo" / "ops.py").write_text(textwrap.dedent(body) + MEAN)
    return sub


def roomy_in_containers(course, sandbox: str) -> None:
    """In a container, a test file's run also starts the container, and each fresh worker imports torch
    from a cold image (3-20 s with other gradings beside it on 2 cores): the demo's limits become 15 s
    per test (a worker restarted after a crash starts inside the next test's time) and 120 s per file."""
    if sandbox == "docker":
        toml = course.master_dir("s00_demo") / "assignment.toml"
        text = toml.read_text().replace("file_timeout_s = 25", "file_timeout_s = 120")
        toml.write_text(text.replace("test_timeout_s = 6", "test_timeout_s = 15"))


def _grade(demo_course, sub: Path, sandbox: str, roots: list[Path] | None = None):
    roomy_in_containers(demo_course, sandbox)
    original = grade_module.new_root

    def remember_root() -> Path:
        root = original()
        if roots is not None:
            roots.append(root)
        return root

    grade_module.new_root = remember_root
    try:
        result = grade_assignment(course=demo_course, assignment_id="s00_demo", submission=sub, sandbox=sandbox,
                                  hardware="cpu")
    finally:
        grade_module.new_root = original
    assert len(result.tests) == 7, "grading must always yield one result per expected test"
    return result, {t.test.nodeid.split("::")[1].split("[")[0]: t for t in result.tests}


def _assert_add_tests_earn_nothing(by_name):
    for name in ADD_TESTS:
        assert by_name[name].score == 0, f"{name} earned points: {by_name[name].reason}"


def _live_processes_mentioning(text: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("sandbox", ["none", pytest.param("bwrap", marks=needs_bwrap),
                                     pytest.param("docker", marks=needs_docker)])
def test_infinite_loop_times_out_and_other_tests_still_count(demo_course, tmp_path, sandbox):
    sub = _submission(tmp_path, demo_course, "def add(a, b):\n    while True:\n        pass\n")
    result, by_name = _grade(demo_course, sub, sandbox)
    _assert_add_tests_earn_nothing(by_name)
    assert "Timeout" in by_name["test_add_small_integers"].output
    assert by_name["test_mean_of_empty_list_raises_value_error"].status == "passed"


def test_ignoring_the_timeout_signal_costs_only_the_tests_that_hang(demo_course, tmp_path):
    """The timeout's signal goes to the judge, not to the worker the submission runs in: the judge
    stops the hung request, kills the worker, and the next test gets a fresh one."""
    sub = _submission(tmp_path, demo_course, """
        import signal
        def add(a, b):
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            while True:
                pass
    """)
    result, by_name = _grade(demo_course, sub, "none")
    _assert_add_tests_earn_nothing(by_name)
    assert "Timeout" in by_name["test_add_small_integers"].output
    assert by_name["test_mean_matches_fsum"].status == "passed"
    assert by_name["test_mean_of_empty_list_raises_value_error"].status == "passed"


@pytest.mark.parametrize("sandbox", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_allocating_past_the_memory_limit_fails_only_that_test(demo_course, tmp_path, sandbox):
    sub = _submission(tmp_path, demo_course, """
        def add(a, b):
            hog = bytearray(64 << 30)  # 64 GiB, far past the 6 GiB limit
            return a + b
    """)
    result, by_name = _grade(demo_course, sub, sandbox)
    _assert_add_tests_earn_nothing(by_name)
    assert "MemoryError" in by_name["test_add_small_integers"].output
    assert by_name["test_mean_of_empty_list_raises_value_error"].status == "passed"


@needs_bwrap
def test_fork_bomb_is_contained_and_cleaned_up(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, """
        import os
        def add(a, b):
            while True:
                os.fork()
    """)
    roots: list[Path] = []
    result, by_name = _grade(demo_course, sub, "bwrap", roots)
    _assert_add_tests_earn_nothing(by_name)
    assert roots and not any(_live_processes_mentioning(str(root)) for root in roots)


@pytest.mark.parametrize("sandbox", ["none", pytest.param("bwrap", marks=needs_bwrap),
                                     pytest.param("docker", marks=needs_docker)])
def test_segfault_fails_only_the_crashing_calls_with_the_signal_named(demo_course, tmp_path, sandbox):
    """The crash ends the worker, not the judge: the next test gets a fresh worker."""
    sub = _submission(tmp_path, demo_course, "import ctypes\ndef add(a, b):\n    return ctypes.string_at(0)\n")
    result, by_name = _grade(demo_course, sub, sandbox)
    _assert_add_tests_earn_nothing(by_name)
    assert "SIGSEGV (segmentation fault)" in by_name["test_add_small_integers"].output
    # ran (and passed) after the crash point; held, as the tamper scan flags the package's ctypes
    assert by_name["test_mean_matches_fsum"].status == "held"
    assert by_name["test_mean_of_empty_list_raises_value_error"].status == "held"


RESTART_PROBE = """
import os as _os

def add(a, b):
    if b"autograder.worker.zygote" not in open(f"/proc/{_os.getppid()}/cmdline", "rb").read():
        _os._exit(3)  # the first worker, a fresh interpreter: end it so that the judge starts another
""" + probe_body()


@needs_bwrap
def test_a_test_worker_restarted_after_a_crash_is_a_fork_as_confined_as_a_fresh_one(demo_course, tmp_path):
    """On a CPU run a worker lost to a crash restarts as a fork of the judge's zygote (judge/forkserver.py).
    The first worker exits on its first call; each later call runs in a restarted worker and reports
    what it can reach: no capability, no zygote control socket, the zygote closed to it, the tests covered."""
    sub = _submission(tmp_path, demo_course, RESTART_PROBE)
    result, by_name = _grade(demo_course, sub, "bwrap")
    _assert_add_tests_earn_nothing(by_name)
    text = "".join(t.output + t.reason for t in result.tests)
    probes = findings(text)
    assert probes, f"no restarted worker was a fork of the zygote (every call ended its worker): {text[-2000:]}"
    for found in probes:
        assert_forked_and_confined(found)


@needs_bwrap
def test_network_is_unreachable_from_the_sandbox(demo_course, tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    sub = _submission(tmp_path, demo_course, f"""
        import socket
        def add(a, b):
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()  # raises when isolated
            return a + b
    """)
    try:
        result, by_name = _grade(demo_course, sub, "bwrap")
    finally:
        server.close()
    _assert_add_tests_earn_nothing(by_name)
    assert "ConnectionRefused" in by_name["test_add_small_integers"].output or \
        "OSError" in by_name["test_add_small_integers"].output


@needs_bwrap
def test_the_course_tree_is_neither_writable_nor_readable(demo_course, tmp_path):
    target = demo_course.root / "pwned.txt"
    hidden = demo_course.solutions / "s00_demo" / "hidden" / "test_ops_hidden.py"
    sub = _submission(tmp_path, demo_course, f"""
        def add(a, b):
            try:
                open({str(target)!r}, "w").write("x")
            except OSError:
                pass
            open({str(hidden)!r}).read()  # the hidden tests must not be visible
            return a + b
    """)
    result, by_name = _grade(demo_course, sub, "bwrap")
    assert not target.exists()
    _assert_add_tests_earn_nothing(by_name)


@pytest.mark.parametrize("exit_call", ["os._exit(0)", "sys.exit(0)"])
def test_exiting_at_import_earns_nothing(demo_course, tmp_path, exit_call):
    sub = _submission(tmp_path, demo_course, f"import os, sys\n{exit_call}\ndef add(a, b):\n    return a + b\n")
    result, by_name = _grade(demo_course, sub, "none")
    assert result.score == 0 and all(t.status in ("failed", "not_graded") for t in result.tests)


def test_monkeypatching_pytest_reports_earns_nothing(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, """
        import _pytest.runner

        _original = _pytest.runner.call_and_report

        def call_and_report(item, when, log=True, **kwargs):
            report = _original(item, when, log=False, **kwargs)
            report.outcome, report.longrepr = "passed", None  # every phase "passes"
            if log:
                item.ihook.pytest_runtest_logreport(report=report)
            return report

        _pytest.runner.call_and_report = call_and_report

        def add(a, b):
            return 0
    """)
    result, by_name = _grade(demo_course, sub, "none")
    _assert_add_tests_earn_nothing(by_name)


def test_skipping_test_bodies_earns_nothing(demo_course, tmp_path):
    """pytest in the worker is not the pytest that runs the tests: rebinding it changes nothing."""
    sub = _submission(tmp_path, demo_course, """
        import pytest
        pytest.Function.runtest = lambda self: None  # never run a test body

        def add(a, b):
            return 0
    """)
    result, by_name = _grade(demo_course, sub, "none")
    _assert_add_tests_earn_nothing(by_name)
    assert "assert 0 == 5" in by_name["test_add_small_integers"].output
    assert by_name["test_mean_matches_fsum"].status == "held"  # passed; held, as the package imports pytest


def test_writing_a_fake_results_file_earns_nothing(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, """
        import glob, json, os
        for name in ["tests/test_ops.py::test_add_small_integers", "hidden/test_ops_hidden.py::test_add_speed_ratio_is_recorded"]:
            body = json.dumps({"kind": "test", "nodeid": name, "status": "passed", "reason": "", "output": "",
                               "metrics": {"ops_ratio": 99.0}, "seq": 1}, sort_keys=True)
            for path in glob.glob(".*.jsonl") + glob.glob("*.jsonl") + [".results.jsonl", ".judge/results.jsonl"]:
                try:  # the judge's folder is empty and read-only in the worker's own view
                    with open(path, "a") as f:
                        f.write(json.dumps({"body": body, "mac": "0" * 64}) + "\\n")
                except OSError:
                    pass

        def add(a, b):
            return 0
    """)
    result, by_name = _grade(demo_course, sub, "none")
    _assert_add_tests_earn_nothing(by_name)
    # where the worker's view cannot be built, the forged record reaches the judge's file and voids it
    add = by_name["test_add_small_integers"]
    assert "tampered" in add.reason or "assert 0 == 5" in add.output, (add.reason, add.output[-500:])
