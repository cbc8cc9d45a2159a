"""The guarded audit of a kernel exercise (autograder/judge/audit.py, autograder/worker/guard.py),
graded end to end on a one-kernel assignment added to the demo course
(tests/fixtures/tampering/audit_course: `scale(x, a)` in a Triton kernel, run by Triton's
interpreter here). Each attack hides torch's compute from the worker's own ledger, as a submission
that reaches the grader's state by reflection can; what must stop it is the replay in the audit
worker, where those ops are refused whatever the ledger says. The host's tamper scan would also
hold these files; failing comes first, and is what these tests check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES, MANIFEST_CACHE, add_assignment

from autograder.host.course_files import ignore
from autograder.host.grade import grade_assignment
from autograder.host.repo import Course
from autograder.judge.audit import ATOL_SHARE, RTOL, Picker, differs
from autograder.judge.proxies import PathRef
from autograder.protocol.messages import Op

ASSIGNMENT = "s09_audit"
COURSE_FILES = FIXTURES / "tampering" / "audit_course" / ASSIGNMENT
TIMED = "test_scale_timed_on_input_sets"


@pytest.fixture(scope="module")
def audit_course(tmp_path_factory) -> Course:
    root = tmp_path_factory.mktemp("audit") / "course"
    shutil.copytree(FIXTURES / "demo_course", root, ignore=ignore())
    course = Course(root, cache=MANIFEST_CACHE)
    files = {str(p.relative_to(COURSE_FILES)): p.read_text() for p in COURSE_FILES.rglob("*") if p.is_file()}
    return add_assignment(course, ASSIGNMENT, files)


def _grade(course: Course, tmp_path: Path, attack: str | None, sandbox: str = "none") -> dict:
    if attack is None:
        result = grade_assignment(course=course, assignment_id=ASSIGNMENT, solution=True, sandbox=sandbox,
                                  hardware="cpu")
    else:
        sub = tmp_path / attack
        shutil.copytree(course.assignments / ASSIGNMENT, sub)
        shutil.copy(FIXTURES / "tampering" / attack / "kpkg" / "scale.py", sub / "kpkg" / "scale.py")
        result = grade_assignment(course=course, assignment_id=ASSIGNMENT, submission=sub, sandbox=sandbox,
                                  hardware="cpu")
    return {"score": result.score, "tests": {t.test.nodeid.split("::")[1]: (t.status, t.reason) for t in result.tests}}


def test_the_reference_kernel_passes_its_audit(audit_course, tmp_path):
    graded = _grade(audit_course, tmp_path, None)
    assert graded["score"] == 3, graded["tests"]  # the timed test too: timed in the audit worker


@pytest.mark.parametrize("attack, phrase", [
    # torch's mul dropped by the ledger's own counters, replaced; a one-element decoy launch
    ("audit_ledger_counters", "aten::mul"),
    # the same, and each answer kept in /tmp and the package folder for the audit worker to read
    ("audit_file_cache", "aten::mul"),
])
def test_compute_hidden_from_the_ledger_fails_the_guarded_audit(audit_course, tmp_path, attack, phrase):
    graded = _grade(audit_course, tmp_path, attack)
    assert graded["score"] == 0, graded["tests"]
    for name, (status, reason) in graded["tests"].items():
        where = "timed in the audit worker" if name == TIMED else "guarded audit"
        assert status == "failed" and where in reason and phrase in reason, (name, reason[:600])


def test_library_kernels_run_only_while_timed_fail_the_timed_test(audit_course, tmp_path):
    """The timed repetitions are not recorded in the test's worker: a package that runs torch's
    multiply only on a buffer it saw in its previous call, as timing loops do (its recorded calls
    use its kernel), would be timed on torch's kernel. It is timed in the audit worker, where that
    multiply is refused; its untimed tests keep their points. Before the audit worker timed it,
    this package earned all 3."""
    graded = _grade(audit_course, tmp_path, "audit_timing_switch")
    status, reason = graded["tests"][TIMED]
    assert status == "failed" and "timed in the audit worker" in reason and "aten::mul" in reason, reason[:600]
    assert graded["score"] == 2, graded["tests"]


class _Target(PathRef):
    """A Remote with a path, without a worker (the picker only reads the path)."""

    def __init__(self, path: str) -> None:
        object.__setattr__(self, "_ag_path", path)


def test_the_picker_chooses_each_plain_call_about_equally_often():
    """Reservoir choice over 4 calls, 4000 trials: each is chosen 1000 +- 150 times (about 5 sigma)."""
    counts = [0] * 4
    for _ in range(4000):
        picker = Picker()
        for i in range(4):
            call = picker.before(Op.CALL, (_Target("kpkg.scale"), (torch.full((2,), float(i)), 2.0), {}))
            if call is not None:
                picker.after(call, torch.zeros(2))
        counts[int(picker.call.args[0][0])] += 1
    assert all(850 <= c <= 1150 for c in counts), counts


def test_the_picker_skips_calls_it_cannot_replay():
    picker = Picker()
    assert picker.before(Op.CALL_METHOD, (_Target("kpkg.Engine"), "step", (), {})) is None  # a method of a worker object
    assert picker.before(Op.CALL, (_Target("kpkg.scale"), (object(),), {})) is None         # an argument that is no value
    call = picker.before(Op.CALL, (_Target("kpkg.scale"), (torch.ones(3), 2.0), {}))
    picker.after(call, _Target("kpkg.Result"))                                              # a result that lives there
    assert picker.call is None


def test_a_result_within_the_tolerance_matches_and_anything_else_is_named():
    expected = torch.tensor([1.0, -2.0, float("nan")])
    assert differs(expected * (1 + RTOL / 2), expected) == ""
    assert differs(expected + ATOL_SHARE * 2 * 3, expected) != ""
    assert "differs in 1 of 3" in differs(torch.tensor([1.0, 0.0, float("nan")]), expected)
    assert "float64" in differs(expected.double(), expected)
    assert differs((expected, 3), (expected, 4)) == "result[1] is 3, not 4"


def test_a_timed_callable_is_made_again_from_its_path_or_its_in_worker_recipe_or_refused():
    """What the audit worker can time: a function of the package (by its path), what an in_worker
    helper returned (its recipe, kept while that object lives); a method of a worker object, or a
    helper called with an argument that cannot be sent, has neither."""
    from autograder.judge.audit import Recipe, note_recipe, recipe_of
    from autograder.judge.proxies import BoundMethod

    assert recipe_of(_Target("kpkg.scale")) == "kpkg.scale"
    made = _Target(None)
    assert recipe_of(made) is None
    note_recipe(made, Recipe("t.py", "t", "helper", (torch.ones(2), 3.0), {"causal": True}))
    assert recipe_of(made).qualname == "helper" and recipe_of(made).kwargs == {"causal": True}
    unsendable = _Target(None)
    note_recipe(unsendable, Recipe("t.py", "t", "helper", (object(),), {}))
    assert recipe_of(unsendable) is None
    assert recipe_of(BoundMethod(_Target("kpkg.Engine"), "step")) is None

