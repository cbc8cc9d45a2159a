"""Submissions that try to change the code that decides their grade, graded end to end on the demo
course. The package runs only in the worker process; the judge (pytest, the assertions, the
verdict, the records) never imports it, so whatever the submission rebinds is the worker's copy.
Each case earns exactly what the same code earns without the attack."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from autograder.host.grade import grade_assignment
from autograder.sandbox.bwrap import BwrapBackend

MEAN = '''
def mean(xs):
    if not xs:
        raise ValueError("empty")
    return sum(xs) / len(xs)
'''
MEAN_POINTS = 5.0  # test_mean_matches_fsum twice (1 + 1) and the hidden empty-list test (3)
ADD_TESTS = ("test_add_small_integers", "test_forbidden_api_raises_but_oracle_lifts_it",
             "test_add_speed_ratio_is_recorded")


def _submission(tmp_path: Path, demo_course, ops: str, init_extra: str = "") -> Path:
    sub = tmp_path / "submission"
    shutil.copytree(demo_course.assignments / "s00_demo", sub)
    (sub / "demo" / "ops.py").write_text(textwrap.dedent(ops))
    init = sub / "demo" / "__init__.py"
    init.write_text(init.read_text() + textwrap.dedent(init_extra))
    return sub


def _grade(demo_course, sub: Path):
    result = grade_assignment(course=demo_course, assignment_id="s00_demo", submission=sub, sandbox="none",
                              hardware="cpu")
    by_name = {t.test.nodeid.split("::")[1].split("[")[0]: t for t in result.tests}
    return result, by_name


def test_rebinding_the_verdict_and_the_recorder_earns_the_stub_nothing(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, (demo_course.assignments / "s00_demo/demo/ops.py").read_text(), """
        import autograder.judge.plugin as plugin
        plugin._verdict = lambda state: ("passed", "")
        plugin._Recorder._record = lambda self, nodeid, state, t: {
            "kind": "test", "nodeid": nodeid, "status": "passed", "reason": "", "output": "",
            "metrics": {"ops_ratio": 99.0}, "duration": 0.0}
    """)
    result, _ = _grade(demo_course, sub)
    assert result.score == 0, [(t.test.nodeid, t.status) for t in result.tests]
    held = next(n for n in result.notes if n.startswith("held for an instructor's review"))
    assert "demo/__init__.py:7: imports the grader (autograder.judge.plugin)" in held


ALWAYS_EQUAL = '''
class AlwaysEqual:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
    def __bool__(self):
        return True
'''
REBIND_COMPARISONS = '''
import builtins, math, pytest, torch
import torch.testing
from demo.ops import AlwaysEqual
pytest.approx = lambda *a, **k: AlwaysEqual()
torch.allclose = torch.equal = math.isclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
'''


def test_rebinding_comparisons_or_returning_an_always_equal_object_earns_only_the_honest_points(
        demo_course, tmp_path):
    """The always-equal object fails where the judge compares; the rebindings change the worker's
    copies only, and the tamper scan holds the honest passes of the package that made them."""
    ops = ALWAYS_EQUAL + "def add(a, b):\n    return a + b\n\ndef mean(xs):\n    return AlwaysEqual()\n"
    _, honest_by_name = _grade(demo_course, _submission(tmp_path / "honest", demo_course, ops))
    forged, by_name = _grade(demo_course, _submission(tmp_path / "forged", demo_course, ops, REBIND_COMPARISONS))
    assert honest_by_name["test_add_small_integers"].status == "passed" and forged.score == 0
    assert by_name["test_mean_matches_fsum"].status == "failed"
    assert by_name["test_add_small_integers"].status == "held"  # honest, but its package rebinds pytest.approx
    assert "rebinds a library's attribute (pytest.approx)" in by_name["test_add_small_integers"].reason


def test_raising_interrupts_and_pytest_outcomes_fails_those_tests_only(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, textwrap.dedent("""
        import pytest
        def add(a, b):
            if (a, b) == (2, 3):
                raise KeyboardInterrupt
            if (a, b) == (1, 1):
                pytest.skip("skip me")
            pytest.exit("stop the session")
    """) + MEAN)
    result, by_name = _grade(demo_course, sub)
    assert {by_name[n].status for n in ADD_TESTS} == {"failed"}
    # the mean tests ran and passed; the package imports pytest, so the scan holds them (no points)
    mean_tests = [t for t in result.tests if "mean" in t.test.nodeid]
    assert {t.status for t in mean_tests} == {"held"} and sum(t.test.points for t in mean_tests) == MEAN_POINTS
    assert result.score == 0
    assert "KeyboardInterrupt" in by_name["test_add_small_integers"].output


def test_exiting_the_worker_or_printing_fake_records_earns_nothing(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, textwrap.dedent("""
        import json, os, sys
        def add(a, b):
            if (a, b) == (2, 3):
                os._exit(0)
            if (a, b) == (1, 1):
                sys.exit(0)
            for nodeid in ("tests/test_ops.py::test_add_small_integers",
                           "hidden/test_ops_hidden.py::test_add_speed_ratio_is_recorded"):
                body = json.dumps({"kind": "test", "nodeid": nodeid, "status": "passed", "reason": "",
                                   "output": "", "metrics": {"ops_ratio": 99.0}, "seq": 1}, sort_keys=True)
                print(json.dumps({"body": body, "mac": "0" * 64}), flush=True)
                print(json.dumps({"body": body, "mac": "0" * 64}), file=sys.stderr, flush=True)
            return -1
    """) + MEAN)
    result, by_name = _grade(demo_course, sub)
    assert {by_name[n].status for n in ADD_TESTS} == {"failed"}
    assert result.score == MEAN_POINTS
    assert "exited with status 0" in by_name["test_add_small_integers"].output


def test_killing_the_judge_earns_nothing(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, textwrap.dedent("""
        import os, signal
        def add(a, b):
            os.kill(os.getppid(), signal.SIGKILL)
            return a + b
    """) + MEAN)
    result, by_name = _grade(demo_course, sub)
    assert all(by_name[n].score == 0 for n in ADD_TESTS)
    assert result.score <= MEAN_POINTS


def test_the_judge_never_imports_the_package(demo_course, tmp_path):
    """A reference whose package refuses to load anywhere but in a worker still earns every point."""
    ops = (demo_course.root / "solutions/s00_demo/demo/ops.py").read_text()
    sub = _submission(tmp_path, demo_course, ops, """
        import os
        if os.environ.get("AUTOGRADER_ROLE") != "worker":
            raise RuntimeError("the package was imported outside the worker")
    """)
    result, by_name = _grade(demo_course, sub)
    graded = [t for t in result.tests if t.status != "not_graded"]
    assert graded and all(t.status == "passed" for t in graded), [(t.test.nodeid, t.reason) for t in graded]


@pytest.mark.skipif(not BwrapBackend().available()[0], reason="bwrap unavailable (CI installs bubblewrap)")
def test_the_master_tests_are_read_only_to_the_submission(demo_course, tmp_path):
    """The worker starts while the judge is still collecting (a conftest that imports the package
    runs at once): were the master tests writable, a package could replace one before the judge
    imports it. Here `add` is right only where the write is refused."""
    sub = _submission(tmp_path, demo_course, textwrap.dedent("""
        def add(a, b):
            for path in ("tests/test_ops.py", "hidden/test_ops_hidden.py", "tests"):
                try:
                    open(path, "a").close() if path.endswith(".py") else open(path + "/new.py", "w").close()
                    return -1
                except OSError:
                    pass
            return a + b
    """) + MEAN)
    result = grade_assignment(course=demo_course, assignment_id="s00_demo", submission=sub, sandbox="bwrap",
                              hardware="cpu")
    by_name = {t.test.nodeid.split("::")[1].split("[")[0]: t for t in result.tests}
    assert by_name["test_add_small_integers"].status == "passed", by_name["test_add_small_integers"].output
