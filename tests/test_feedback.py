"""What a student reads when a test fails: one line that names the exception, its message and the line
of their own code it came from (through a helper, and through Triton's interpreter, which wraps the real
error), with paths as the student has them, never the grader's temporary copy; an assertion's message
from the test itself."""

from __future__ import annotations

import re
from pathlib import Path

from autograder.host.grade import grade_assignment
from autograder.host.repo import Course

OPS = '''"""Arithmetic the tests check."""


def _divide(total, count):
    return total / count


def add(a: float, b: float) -> float:
    """a + b."""
    return a + b + 1


def mean(xs: list[float]) -> float:
    """Arithmetic mean; ValueError on an empty list."""
    return _divide(sum(xs), len(xs) - 1)
'''


def _by_name(result) -> dict:
    return {t.test.nodeid.split("::")[1]: t for t in result.tests}


def test_a_failure_names_the_students_own_line_and_path(demo_course: Course, tmp_path: Path):
    sub = tmp_path / "submission"
    (sub / "demo").mkdir(parents=True)
    (sub / "demo" / "__init__.py").write_text("from demo.ops import add, mean\n")
    (sub / "demo" / "ops.py").write_text(OPS)
    tests = _by_name(grade_assignment(course=demo_course, assignment_id="s00_demo", submission=sub))
    crashed = tests["test_mean_matches_fsum[xs1-5.0]"]  # len 1 - 1 = 0: ZeroDivisionError in _divide
    assert crashed.status == "failed"
    assert crashed.reason.startswith("ZeroDivisionError: "), crashed.reason
    assert "in your code: demo/ops.py:5: return total / count" in crashed.reason, crashed.reason
    wrong = tests["test_add_small_integers"]  # the judge's own assertion: its message, no student line
    assert wrong.status == "failed" and wrong.reason.startswith("AssertionError: assert 6 == 5"), wrong.reason
    for t in tests.values():
        assert not re.search(r"/tmp/autograder-[^/]+/batch\d+/demo", t.output), t.output


def test_a_triton_interpreter_error_names_the_kernel_line(repo_course: Course, tmp_path: Path):
    """A typo in a kernel body (tl.rsqrtt) surfaces as triton's InterpreterError raised deep inside
    Triton; the reason still names the student's kernel line."""
    sub = tmp_path / "submission"
    kernels = repo_course.solutions / "s04_kernels" / "tritonkernels"
    (sub / "tritonkernels").mkdir(parents=True)
    for path in kernels.glob("*.py"):
        (sub / "tritonkernels" / path.name).write_text(path.read_text())
    source = (sub / "tritonkernels" / "rmsnorm.py").read_text()
    assert source.count("rstd = 1.0 / tl.sqrt(mean_sq + eps)") == 1
    source = source.replace("rstd = 1.0 / tl.sqrt(mean_sq + eps)", "rstd = tl.rsqrtt(mean_sq + eps)")
    (sub / "tritonkernels" / "rmsnorm.py").write_text(source)
    line = source.splitlines().index("    rstd = tl.rsqrtt(mean_sq + eps)") + 1
    result = grade_assignment(course=repo_course, assignment_id="s04_kernels", submission=sub,
                              only_files=["tests/test_rmsnorm.py"], probe=False)
    failed = [t for t in result.tests if t.status == "failed"]
    assert failed
    for t in failed:
        assert "rsqrtt" in t.reason and f"in your code: tritonkernels/rmsnorm.py:{line}: " in t.reason, t.reason


def test_parameter_ids_read_as_what_they_mean():
    """bf16, not dtype1; 3x7x33, not shape2; anything else keeps pytest's own id."""
    import torch

    from autograder.judge.feedback import parameter_id

    assert [parameter_id(d) for d in (torch.bfloat16, torch.float16, torch.float32, torch.int8)] == \
        ["bf16", "fp16", "fp32", "int8"]
    assert parameter_id((3, 7, 33)) == "3x7x33" and parameter_id((5000,)) == "5000"
    assert parameter_id(()) is None and parameter_id((1.5, 2)) is None and parameter_id("x") is None


def test_progress_moves_with_every_test_not_every_file(demo_course: Course):
    """One file of four tests that take 0.8 s each: the progress callback sees the count grow while the
    file runs (a bar that moved once per file would report 4/4 once), never backwards, ending at 4/4."""
    slow = demo_course.solutions / "s00_demo" / "tests" / "test_slow.py"
    slow.write_text("import time\n\nimport pytest\n\n\n@pytest.mark.parametrize('i', range(4))\n"
                    "def test_slow(i):\n    time.sleep(0.8)\n")
    events: list[tuple[str, int, int]] = []
    grade_assignment(course=demo_course, assignment_id="s00_demo", solution=True, only_files=["tests/test_slow.py"],
                     progress=lambda label, done, total: events.append((label, done, total)))
    counts = [done for _, done, _ in events]
    assert {total for _, _, total in events} == {4} and counts[-1] == 4, events
    assert counts == sorted(counts) and len(set(counts)) >= 3, f"the count moved only {len(set(counts))} times: {events}"
    assert any(label.startswith("tests/test_slow.py::test_slow[") for label, _, _ in events), events


def test_an_unwritten_kernel_task_is_named_before_the_accounting_verdict():
    """A kernel stub fails twice: its NotImplementedError (the task id) and the accounting's "no Triton
    kernel ran". The task id comes first, so failures fold by task; a wrong approach that raises
    something else keeps the accounting's verdict as its reason."""
    from autograder.judge.verdict import TestState as _TestState
    from autograder.judge.verdict import verdict as _verdict

    base = dict(setup="passed", call="failed", teardown="passed", entered=True,
                violation="no Triton kernel of tritonkernels ran: this exercise is to write it")
    stub = _TestState(call_raised="NotImplementedError", failure="NotImplementedError: s04.7: fused_add_rmsnorm", **base)
    status, reason = _verdict(stub)
    assert status == "failed" and reason.splitlines() == [stub.failure, stub.violation]
    wrong = _TestState(call_raised="AssertionError", failure="AssertionError: off by 1e-2", **base)
    assert _verdict(wrong) == ("failed", wrong.violation)


def test_a_state_machine_failure_prints_its_shrunk_steps_also_for_a_hidden_test():
    """Hypothesis's shrunk steps are drawn in the judge: a hidden test shows them (its message stays out)."""
    from hypothesis import settings
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, rule

    from autograder.judge.feedback import HIDDEN_DETAIL, failure_reason, hidden_reason

    class Pool(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.used = 0

        @rule(n=st.integers(0, 5))
        def allocate(self, n: int) -> None:
            self.used += n
            assert self.used < 7, f"secret value {self.used}"

    case = Pool.TestCase
    case.settings = settings(derandomize=True, database=None, max_examples=50)
    try:
        case().runTest()
    except AssertionError as exc:
        public, hidden = failure_reason(exc), hidden_reason(exc)
    assert "steps to reproduce: state = Pool(); state.allocate(n=" in public, public
    assert "secret value" in public and "secret value" not in hidden, hidden
    assert HIDDEN_DETAIL in hidden and "steps to reproduce: state = Pool(); state.allocate(n=" in hidden, hidden


def test_a_torch_closeness_failure_line_carries_the_numbers_not_only_its_heading():
    """assert_close's first line ("Scalars are not close!") is a heading: expected, got and the
    tolerance follow on later lines and must reach the one-line reason."""
    import torch

    from autograder.judge.feedback import failure_reason

    for actual, expected, numbers in [(torch.tensor(1.0), torch.tensor(2.0), "Expected 2.0 but got 1.0"),
                                      (torch.ones(4), torch.tensor([1.0, 1.0, 3.0, 1.0]), "at index (2,)")]:
        try:
            torch.testing.assert_close(actual, expected)
        except AssertionError as exc:
            line = failure_reason(exc)
        assert "not close!" in line and numbers in line and "allowed" in line and "\n" not in line, line


def test_a_multi_rank_failure_line_names_the_failing_rank_and_its_reason_first():
    """The ranks fixture's message is a heading and a line per rank; the one-line reason must show
    the failing rank's exception, not stop at the heading's colon."""
    from types import SimpleNamespace

    from autograder.judge.feedback import failure_reason
    from autograder.judge.ranks import RankFailure, RankGroup

    group = SimpleNamespace(world=3, where=lambda r: f"step {r}",
                            clients=[SimpleNamespace(take_output=lambda: "")] * 3)
    message = RankGroup._describe(group, "ran groups_on_rank", {2: ValueError("group sizes [1, 3] differ")}, [])
    line = failure_reason(RankFailure(message))
    assert line.startswith("RankFailure: 1 of 3 ranks failed while the test ran groups_on_rank: "
                           "rank 2: ValueError: group sizes [1, 3] differ"), line
