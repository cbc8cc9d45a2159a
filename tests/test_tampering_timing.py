"""Timing attacks on the course timer, each against a worker on CPU: a timer whose median is tiny
but whose sum is plausible, a result cache keyed on the inputs' identity and one keyed on their
content, a time past what the card can do. The last part grades attack submissions under
tests/fixtures/tampering/timing_*/ on the demo course with a rotated-input perf test added."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from autograder.judge import ceilings, importer, plugin
from autograder.judge.client import WorkerClient
from autograder.protocol.messages import HeldForReview
from autograder.timing import Work, measure

GRADER = Path(__file__).resolve().parent.parent / "autograder"
FIXTURES = Path(__file__).parent / "fixtures" / "tampering"
WORK_S = 0.004  # each honest call sleeps 4 ms: far above the timer's own noise on a loaded CPU

PACKAGE = f'''
import time
import torch
def work(x):
    time.sleep({WORK_S})
    return x * 2
'''
# From its first timed call on, a clock that stands still through repetitions 1-6 and hands the
# time it hid to the last one: six samples of zero (a median of zero), a sum close to the truth.
TINY_MEDIAN_CLOCK = f'''
_real, _calls, _state = time.perf_counter, [0], {{"offset": 0.0, "start": 0.0}}
def _clock():
    n, now = _state.get("n", 0), _real()
    _state["n"] = n + 1  # calls after the swap: end 0, then start i, end i for i = 1..7
    if n % 2 == 1:
        _state["start"] = now + _state["offset"]
        return _state["start"]
    if 2 <= n <= 12:  # the end of repetitions 1-6: no time passed
        _state["offset"] = _state["start"] - now
        return _state["start"]
    return now
def work(x):
    _calls[0] += 1
    if _calls[0] == 2:  # the first timed call (after one warm-up)
        time.perf_counter = _clock
    time.sleep({WORK_S})
    return x * 2
'''
IDENTITY_CACHE = f'''
_cache = {{}}
def work(x):
    if id(x) not in _cache:
        time.sleep({WORK_S})
        _cache[id(x)] = x * 2
    return _cache[id(x)]
'''
CONTENT_CACHE = f'''
_cache = {{}}
def work(x):
    key = tuple(x[:4].tolist())  # a fingerprint of four elements: nearly free
    if key not in _cache:
        time.sleep({WORK_S})
        _cache[key] = x * 2
    return _cache[key].clone()
'''


@pytest.fixture
def worker_of(tmp_path, monkeypatch):
    """A judge-side client for a package `slowpkg` written into tmp_path, as the grading plugin holds."""
    clients = []

    def start(code: str) -> None:
        (tmp_path / "slowpkg").mkdir()
        (tmp_path / "slowpkg" / "__init__.py").write_text(textwrap.dedent(PACKAGE + code))
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(GRADER.parent)]))
        client = WorkerClient("slowpkg")
        finder = importer.install("slowpkg", client)
        clients.append((client, finder))
        monkeypatch.setattr(plugin, "_client", client)
        client.start()

    yield start
    for client, finder in clients:
        client.kill()
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.startswith("slowpkg")]:
            del sys.modules[name]


def _sets(k: int = 4, n: int = 1024) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(n, generator=g),) for _ in range(k)]


def _check_doubles(sets):
    def check(k, out):
        assert torch.equal(out, sets[k][0] * 2), f"set {k}: not 2x its input"

    return check


def test_a_tiny_median_with_a_plausible_sum_earns_no_speed(worker_of):
    """The bracket vouches for the sum; the graded statistic is the mean, so skewing the samples
    (one long repetition, six of zero) changes nothing graded: the mean stays >= 75% of 4 ms."""
    worker_of(TINY_MEDIAN_CLOCK)
    import slowpkg

    sets = _sets()
    # on the CPU clock the attack rebinds (on a CUDA machine the default would be CUDA events)
    timing = measure(slowpkg.work, warmup=1, reps=8, inputs=sets, check=_check_doubles(sets), device="cpu")
    assert timing.median_s == 0.0, "the skewing timer was not in effect"
    assert timing.graded_s >= 0.75 * WORK_S, f"graded {timing.graded_s * 1e3:.2f} ms for 4 ms calls"


def test_honest_calls_on_rotated_inputs_pass_and_each_set_is_checked(worker_of):
    worker_of("")
    import slowpkg

    sets, seen = _sets(), []
    check = _check_doubles(sets)
    timing = measure(slowpkg.work, warmup=1, reps=8, inputs=sets, check=lambda k, out: (seen.append(k), check(k, out)))
    assert sorted(seen) == [0, 1, 2, 3, 3]  # each set's last timed repetition, and the audited call (set 7 % 4)
    assert len(timing.outputs) == 4 and timing.graded_s >= WORK_S


def test_a_cache_keyed_on_the_input_tensor_fails_the_recheck(worker_of):
    """The call reads the same static buffers every repetition: an identity cache returns set 0's
    answer for set 1."""
    worker_of(IDENTITY_CACHE)
    import slowpkg

    sets = _sets()
    with pytest.raises(AssertionError, match="last timed repetition on input set 1 is wrong.*set 1: not 2x"):
        measure(slowpkg.work, warmup=1, reps=8, inputs=sets, check=_check_doubles(sets))


def test_a_cache_keyed_on_content_is_held_past_the_ceiling(worker_of, monkeypatch):
    """A fingerprint cache answers right but for free after each set's first repetition: 2 of 20
    calls take 4 ms, so the mean claims a 10x speed-up. With the ceiling at the honest rate (fake
    ceilings: a CPU has no fixed peak to test against), honest calls pass and the cache is held
    (past the CPU margin of 4)."""
    work = Work(flops=1e9)  # declared per call: honest 4 ms -> 0.25 TFLOP/s
    monkeypatch.setitem(ceilings._measured, "cpu", ceilings.Ceilings(work.flops / WORK_S, 1e12, "cpu"))
    worker_of(CONTENT_CACHE)
    import slowpkg

    sets = _sets(k=2)
    with pytest.raises(HeldForReview, match=r"TFLOP/s against a measured GEMM ceiling of 0\.25"):
        measure(slowpkg.work, warmup=0, reps=20, inputs=sets, check=_check_doubles(sets), work=work, device="cpu")


def test_honest_calls_under_the_same_fake_ceiling_are_not_held(worker_of, monkeypatch):
    work = Work(flops=1e9)
    monkeypatch.setitem(ceilings._measured, "cpu", ceilings.Ceilings(work.flops / WORK_S, 1e12, "cpu"))
    worker_of("")
    import slowpkg

    sets = _sets(k=2)
    measure(slowpkg.work, warmup=0, reps=6, inputs=sets, check=_check_doubles(sets), work=work, device="cpu")


@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
@pytest.mark.parametrize(("times_margin", "held"), [(0.9, False), (1.1, True)])
def test_a_rate_past_the_margin_is_held_with_the_numbers(monkeypatch, device, times_margin, held):
    """The margin over the measured ceiling: 1.5 on a GPU (a kernel at the data sheet's peak stays
    under it), 4 on a CPU; 0.9x the margin passes, 1.1x is held, naming the rate and the ceiling."""
    monkeypatch.setitem(ceilings._measured, device, ceilings.Ceilings(1e12, 1e9, device))
    assert ceilings.margin(device) == (4.0 if device == "cpu" else 1.5)
    seconds = 1e-3
    work = Work(bytes=times_margin * ceilings.margin(device) * 1e9 * seconds)
    if held:
        with pytest.raises(HeldForReview, match=rf"1000\.0 us per call on {device}.* TB/s against a measured copy "
                                                r"ceiling of 0\.001"):
            ceilings.check(work, seconds, device)
    else:
        ceilings.check(work, seconds, device)


def test_rotated_inputs_are_refused_when_sets_repeat_or_differ_in_shape():
    x = torch.ones(4)
    with pytest.raises(ValueError, match="hold the same values"):
        measure(lambda a: a, reps=4, inputs=[(x,), (x.clone(),)], device="cpu")
    with pytest.raises(ValueError, match="another shape"):
        measure(lambda a: a, reps=4, inputs=[(x,), (torch.ones(5),)], device="cpu")
    with pytest.raises(ValueError, match="at least 2 sets"):
        measure(lambda a: a, reps=4, inputs=[(x,)], device="cpu")
    with pytest.raises(ValueError, match="positive flops"):
        Work()


def test_a_judge_baseline_on_rotated_inputs_reads_each_set():
    sets = _sets(k=3, n=8)
    timing = measure(lambda a: a + 1, warmup=1, reps=6, inputs=sets, device="cpu",
                     check=lambda k, out: torch.testing.assert_close(out, sets[k][0] + 1))
    assert [torch.equal(o, s[0] + 1) for o, s in zip(timing.outputs, sets, strict=True)] == [True] * 3


# ---- graded end to end on the demo course, with a rotated-input perf test added ---------------

def _demo_with_rotated_perf_test(demo_course):
    """The private demo copy, with test_add_on_rotated_inputs and its bar (kept out of the shared
    fixture, whose test counts other tests assert); a public test, so that its reason shows."""
    from autograder.authoring.stubs import write_assignment

    extra = FIXTURES / "timing_demo_perf"
    sol = demo_course.solutions / "s00_demo"
    shutil.copy(extra / "test_add_rotated.py", sol / "tests" / "test_add_rotated.py")
    toml = sol / "assignment.toml"
    limits = toml.read_text().replace("test_timeout_s = 6", "test_timeout_s = 20").replace(
        "file_timeout_s = 25", "file_timeout_s = 60")  # 64 timed adds on both sides, on a shared 2-core host
    toml.write_text(limits + (extra / "perf.toml").read_text())
    write_assignment(demo_course, "s00_demo")
    return demo_course


def _graded_perf_test(demo_course, tmp_path, attack: str | None):
    from autograder.host.grade import grade_assignment

    course = _demo_with_rotated_perf_test(demo_course)
    sub = None
    if attack is not None:
        sub = tmp_path / "submission"
        shutil.copytree(course.assignments / "s00_demo", sub)
        shutil.copy(FIXTURES / attack / "demo" / "ops.py", sub / "demo" / "ops.py")
    result = grade_assignment(course=course, assignment_id="s00_demo", solution=attack is None, submission=sub,
                              sandbox="none", hardware="cpu")
    return next(t for t in result.tests if "test_add_on_rotated_inputs" in t.test.nodeid)


def test_the_demo_reference_earns_full_marks_on_rotated_inputs(demo_course, tmp_path):
    test = _graded_perf_test(demo_course, tmp_path, None)
    assert test.status == "passed" and test.score == pytest.approx(2.0), (test.status, test.reason)


def test_an_identity_cache_fails_the_perf_test(demo_course, tmp_path):
    test = _graded_perf_test(demo_course, tmp_path, "timing_identity_cache")
    assert test.status == "failed" and test.score == 0, (test.status, test.reason)
    assert "the last timed repetition on input set 1 is wrong" in test.reason, test.reason


def test_a_content_cache_is_held_past_the_cpu_ceiling(demo_course, tmp_path):
    """Right answers, each of 2 sets computed once in 256 repetitions: the claimed rate is past 4x
    the copy bandwidth measured in the same run. Held (or failed, where the judge does not record
    HeldForReview as held), never credited."""
    test = _graded_perf_test(demo_course, tmp_path, "timing_content_cache")
    assert test.status in ("held", "failed") and test.score == 0, (test.status, test.reason)
    assert "Held for an instructor's review" in test.reason and "TB/s against a measured copy" in test.reason
