"""Submissions that tamper with what runs beside them in the worker process, graded end to end on a
small assignment added to the demo course (tests/fixtures/tampering/worker_course: `add`, `total`
without math.fsum, `sigmoid` without torch's own, one test calling `add` from an `in_worker`
helper, one drawing inputs after calls). Each attack replaces the stub's wpkg/ops.py with
tests/fixtures/tampering/worker_<attack>/wpkg/ops.py and implements nothing honestly, so each must
earn 0 of the 4 points; without the defence it names, each earned 1.

A decoy Triton launch has no case of its own: in a kernel exercise the ledger already refuses the
torch ops beside it; what made a decoy pay was hiding those ops from the ledger (a private
profiler toggle, a thread of the package's, a rewritten ledger), each of which has a case here.

What decides here is the worker's own registry and identity checks (autograder/worker/trust.py,
toggles.py) and the judge's RNG rule (autograder/judge/client.py); the host's static scan, which
would also flag most of these files, is not what these tests rely on.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, MANIFEST_CACHE, add_assignment

from autograder.host.course_files import ignore
from autograder.host.grade import grade_assignment
from autograder.host.repo import Course

ASSIGNMENT = "s09_worker"
COURSE_FILES = FIXTURES / "tampering" / "worker_course" / ASSIGNMENT


@pytest.fixture(scope="module")
def worker_course(tmp_path_factory) -> Course:
    """The demo course with s09_worker added (its stubs generated), shared by this module's gradings."""
    root = tmp_path_factory.mktemp("worker") / "course"
    shutil.copytree(FIXTURES / "demo_course", root, ignore=ignore())
    course = Course(root, cache=MANIFEST_CACHE)
    files = {str(p.relative_to(COURSE_FILES)): p.read_text() for p in COURSE_FILES.rglob("*") if p.is_file()}
    return add_assignment(course, ASSIGNMENT, files)


def _grade(course: Course, tmp_path: Path, attack: str | None) -> dict:
    """Status and reason by test name, and the score, of the stub with `attack`'s ops.py (None: the reference)."""
    if attack is None:
        result = grade_assignment(course=course, assignment_id=ASSIGNMENT, solution=True, sandbox="none",
                                  hardware="cpu")
    else:
        sub = tmp_path / attack
        shutil.copytree(course.assignments / ASSIGNMENT, sub)
        shutil.copy(FIXTURES / "tampering" / attack / "wpkg" / "ops.py", sub / "wpkg" / "ops.py")
        result = grade_assignment(course=course, assignment_id=ASSIGNMENT, submission=sub, sandbox="none",
                                  hardware="cpu")
    tests = {t.test.nodeid.split("::")[1]: (t.status, t.reason) for t in result.tests}
    return {"score": result.score, "tests": tests}


def test_the_reference_earns_every_point_with_the_worker_side_guards_in_place(worker_course, tmp_path):
    graded = _grade(worker_course, tmp_path, None)
    assert graded["score"] == 4, graded["tests"]


# attack -> (the test it targeted, a phrase its failure reason must contain; "" when any failure will do)
ATTACKS = {
    # oracle() from code compiled with the master test's __name__ and file name, called directly by
    # the worker (no frame of the package on the stack): identity decides, the name does not
    "worker_oracle_claimed_name": ("test_total_adds_floats", "oracle()"),
    # a module planted in sys.modules under the test module's name, with its __file__, whose in_worker
    # helper answers without the package: the worker keeps its own registry of the test modules
    "worker_planted_test_module": ("test_add_called_in_the_worker", "NotImplementedError"),
    # torch's private _toggle_collection_dynamic around the forbidden op: the switch is the grader's
    "worker_profiler_toggle": ("test_sigmoid_without_torchs_own", "_toggle_collection_dynamic"),
    # Accountant.export rebound through sys.modules by a computed name: put back before the test ends
    "worker_ledger_rewrite": ("test_sigmoid_without_torchs_own", "Accountant.export"),
    # the forbidden op computed in a thread the package started: the profiler records every thread
    "worker_thread_compute": ("test_sigmoid_without_torchs_own", "aten::sigmoid"),
    # an RNG state of the package's choosing in the reply to a call that sent none: the judge keeps its own
    "worker_rng_in_reply": ("test_add_on_inputs_drawn_after_calls", "assert -1 =="),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_on_the_worker_side_earns_nothing(worker_course, tmp_path, attack):
    target, phrase = ATTACKS[attack]
    graded = _grade(worker_course, tmp_path, attack)
    status, reason = graded["tests"][target]
    assert status == "failed", f"{attack} passed {target}, which it only reaches by tampering"
    assert phrase in reason, f"{attack}: {target} failed for another reason than the defence: {reason[:400]}"
    assert graded["score"] == 0, f"{attack} earned {graded['score']} points: {graded['tests']}"


TRUST_PROBE = '''
import sys, types
from autograder.worker import trust
trust.pin("wpkg")
module = trust.test_module("test_probe", sys.argv[1], lambda: trust.load_trusted("test_probe", sys.argv[1]))
assert trust.test_module("test_probe", sys.argv[1], lambda: 1 / 0) is module, "loaded twice"
assert trust.trusted_function(module, "helper")() == ""   # the test's own helper, on a trusted stack
rebuilt = types.FunctionType(module.helper.__code__, {"trust": trust, "sys": sys})
print("rebuilt:", rebuilt() != "")                        # the test's code around other globals: foreign
module.helper = lambda: ""
try:
    trust.trusted_function(module, "helper")
    print("rebound: accepted")
except RuntimeError as exc:
    print("rebound:", "tampering" in str(exc))
'''
PROBE_TEST = '''
import sys
from autograder.worker import trust
def helper():
    return trust.foreign_frame(sys._getframe())
'''


def test_a_test_function_is_trusted_by_its_code_and_its_namespace_not_its_name(tmp_path):
    """In a fresh interpreter (pinning is process-wide): the worker's own copy of a test module is
    loaded once; its function rebuilt around other globals runs as foreign code; a function rebound
    on the module is refused."""
    (tmp_path / "test_probe.py").write_text(PROBE_TEST)
    run = subprocess.run([sys.executable, "-c", TRUST_PROBE, str(tmp_path / "test_probe.py")], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "rebuilt: True" in run.stdout and "rebound: True" in run.stdout, run.stdout
