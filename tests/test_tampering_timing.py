"""Timing attacks on the course timer, each against a worker on CPU: a timer whose median is tiny
but whose sum is plausible, a result cache keyed on the inputs' identity and one keyed on their
content, a stale answer on one repetition, a time past what the card can do. The last part grades
attack submissions under tests/fixtures/tampering/timing_*/ on the demo course with an input-set
perf test added."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from autograder.judge import ceilings, importer, this_run
from autograder.judge.client import WorkerClient
from autograder.protocol.messages import HeldForReview, Op
from autograder.timing import Work, measure
from autograder.worker import feed, timer

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
# A cache keyed on a hash of the input's bytes: free on a hit, and it counts its hits.
CONTENT_CACHE = f'''
import hashlib
_cache, _hits = {{}}, [0]
def work(x):
    key = hashlib.sha256(x.numpy().tobytes()).hexdigest()
    if key in _cache:
        _hits[0] += 1
        return _cache[key].clone()
    time.sleep({WORK_S})
    _cache[key] = x * 2
    return _cache[key].clone()
def hits():
    return _hits[0]
'''
# Right on every call but one: timed repetition 5 (call 7, after one warm-up) returns the answer
# of the call before it, as a cache that served a near-miss would.
STALE_ON_REPETITION_5 = f'''
_state = {{"calls": 0, "last": None}}
def work(x):
    _state["calls"] += 1
    if _state["calls"] == 7:
        return _state["last"].clone()
    time.sleep({WORK_S})
    _state["last"] = x * 2
    return _state["last"]
'''


@pytest.fixture
def worker_of(tmp_path, monkeypatch):
    """A judge-side client for a package `slowpkg` written into tmp_path, as the grading plugin holds."""
    clients = []

    def start(code: str) -> WorkerClient:
        (tmp_path / "slowpkg").mkdir()
        (tmp_path / "slowpkg" / "__init__.py").write_text(textwrap.dedent(PACKAGE + code))
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(GRADER.parent)]))
        client = WorkerClient("slowpkg")
        finder = importer.install("slowpkg", client)
        clients.append((client, finder))
        monkeypatch.setattr(this_run, "worker", client)
        client.start()
        return client

    yield start
    for client, finder in clients:
        client.kill()
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.startswith("slowpkg")]:
            del sys.modules[name]


@pytest.fixture
def picks(monkeypatch):
    """The test seam of the judge's draw: `picks(list)` makes it check those repetitions; the
    draws made are logged (with the reps they were drawn for) in the returned list."""
    drawn: list = []

    def pick(chosen: list[int]) -> list:
        monkeypatch.setattr(feed, "pick_checked", lambda reps: (drawn.append(("pick", reps)), list(chosen))[1])
        return drawn

    return pick


def _sets(k: int = 8, n: int = 1024) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(n, generator=g),) for _ in range(k)]


def _check_doubles(sets, seen: list | None = None):
    def check(k, out):
        if seen is not None:
            seen.append(k)
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


def test_the_judge_draws_the_checked_repetitions_after_the_timed_reply(worker_of, picks, monkeypatch):
    """The timed request names no repetition; the draw comes after its reply, and only the drawn
    repetitions' outputs are fetched (then the audited call's, on the last set, is checked too)."""
    client = worker_of("")
    import slowpkg

    log = picks([1, 5, 6])
    request = client.request

    def logged(op, *args):
        if op is Op.MEASURE:  # (target, phase, options)
            log.append((args[1], sorted(args[2])))
        return request(op, *args)

    monkeypatch.setattr(client, "request", logged)
    sets, seen = _sets(), []
    timing = measure(slowpkg.work, warmup=1, reps=8, inputs=sets, check=_check_doubles(sets, seen))
    phases = [entry[0] for entry in log]
    assert phases.index("timed") < phases.index("pick") < phases.index("outputs"), log
    assert ("timed", ["cuda_graph", "device", "flush_l2", "reps", "sets"]) in log
    assert seen == [1, 5, 6, 7] and [i for i, _ in timing.outputs] == [1, 5, 6]
    assert timing.graded_s >= 0.75 * WORK_S


def test_the_worker_keeps_every_repetitions_output_on_its_own_set(worker_of, picks):
    """Drawing all 8 repetitions: each kept output is right for its own set (none repeats)."""
    worker_of("")
    import slowpkg

    picks(list(range(8)))
    sets, seen = _sets(), []
    timing = measure(slowpkg.work, warmup=1, reps=8, inputs=sets, check=_check_doubles(sets, seen))
    assert seen == [0, 1, 2, 3, 4, 5, 6, 7, 7] and len(timing.outputs) == 8


def test_the_default_draw_is_four_distinct_repetitions_or_all():
    for _ in range(20):
        drawn = feed.pick_checked(20)
        assert len(set(drawn)) == 4 and all(0 <= i < 20 for i in drawn)
    assert feed.pick_checked(3) == [0, 1, 2]


def test_a_stale_answer_fails_when_its_repetition_is_drawn(worker_of, picks):
    worker_of(STALE_ON_REPETITION_5)
    import slowpkg

    picks([2, 5])
    sets = _sets()
    with pytest.raises(AssertionError, match=r"timed repetition 5 \(input set 5\) is wrong.*set 5: not 2x"):
        measure(slowpkg.work, warmup=1, reps=8, inputs=sets, check=_check_doubles(sets))


def test_a_cache_keyed_on_the_input_tensor_fails_the_recheck(worker_of, picks):
    """The call reads the same static buffers every repetition: an identity cache returns the
    warm-up's answer (for set 0 negated) for set 1."""
    worker_of(IDENTITY_CACHE)
    import slowpkg

    picks([1])
    sets = _sets()
    with pytest.raises(AssertionError, match=r"timed repetition 1 \(input set 1\) is wrong.*set 1: not 2x"):
        measure(slowpkg.work, warmup=1, reps=8, inputs=sets, check=_check_doubles(sets))


def test_a_cache_keyed_on_the_inputs_bytes_never_hits_in_timed_repetitions(worker_of, picks):
    """One distinct set per repetition: a content cache misses on every timed call, so each one
    does its 4 ms of work (hits = 0 after the loop, the mean >= 75% of 4 ms), and every kept output
    is right for its own set. The one hit is the audited call (the last set, seen by repetition
    7); the warm-up runs on set 0 with its floats negated, values no repetition sees."""
    worker_of(CONTENT_CACHE)
    import slowpkg

    picks(list(range(8)))
    sets, seen = _sets(), []
    timing = measure(slowpkg.work, warmup=1, reps=8, inputs=sets, check=_check_doubles(sets, seen), device="cpu")
    assert slowpkg.hits() == 1, "a timed repetition was answered from the cache"
    assert seen == list(range(8)) + [7] and timing.graded_s >= 0.75 * WORK_S


def test_a_worker_callable_on_fewer_sets_than_repetitions_is_refused(worker_of):
    worker_of("")
    import slowpkg

    sets = _sets(k=4)
    with pytest.raises(ValueError, match=r"one distinct input set per repetition \(got 4 sets for reps=8\).*cache"):
        measure(slowpkg.work, warmup=1, reps=8, inputs=sets, check=_check_doubles(sets))


def test_honest_calls_under_a_fake_ceiling_are_not_held(worker_of, monkeypatch):
    work = Work(flops=1e9)  # declared per call: honest 4 ms -> 0.25 TFLOP/s, the fake ceiling
    monkeypatch.setitem(ceilings._measured, "cpu", ceilings.Ceilings(work.flops / WORK_S, 1e12, "cpu"))
    worker_of("")
    import slowpkg

    sets = _sets(k=6)
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


def test_input_sets_are_refused_when_they_repeat_or_differ_in_shape():
    x = torch.ones(4)
    with pytest.raises(ValueError, match="hold the same values"):
        measure(lambda a: a, reps=4, inputs=[(x,), (x.clone(),)], device="cpu")
    with pytest.raises(ValueError, match="another shape"):
        measure(lambda a: a, reps=4, inputs=[(x,), (torch.ones(5),)], device="cpu")
    with pytest.raises(ValueError, match="at least 2 sets"):
        measure(lambda a: a, reps=4, inputs=[(x,)], device="cpu")
    with pytest.raises(ValueError, match="positive flops"):
        Work()


def test_a_judge_baseline_may_run_several_repetitions_on_each_set(picks):
    """The judge's own code cannot cache: 3 sets over 6 repetitions, two consecutive on each."""
    picks([0, 1, 2, 3, 4, 5])
    sets = _sets(k=3, n=8)
    timing = measure(lambda a: a + 1, warmup=1, reps=6, inputs=sets, device="cpu",
                     check=lambda k, out: torch.testing.assert_close(out, sets[k][0] + 1))
    assert [torch.equal(out, sets[i // 2][0] + 1) for i, out in timing.outputs] == [True] * 6


# ---- graded end to end on the demo course, with an input-set perf test added -------------------

def _demo_with_rotated_perf_test(demo_course):
    """The private demo copy, with test_add_on_rotated_inputs and its bar (kept out of the shared
    fixture, whose test counts other tests assert); a public test, so that its reason shows."""
    from autograder.authoring.stubs import write_assignment

    extra = FIXTURES / "timing_demo_perf"
    sol = demo_course.solutions / "s00_demo"
    shutil.copy(extra / "test_add_rotated.py", sol / "tests" / "test_add_rotated.py")
    toml = sol / "assignment.toml"
    limits = toml.read_text().replace("test_timeout_s = 6", "test_timeout_s = 60").replace(
        "file_timeout_s = 25", "file_timeout_s = 120")  # 18 outer adds a side (~0.6 s each in an attack), 2 shared cores
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
    assert "is wrong" in test.reason and "not the sum of its inputs" in test.reason, test.reason


def test_a_slow_add_behind_a_content_cache_earns_nothing(demo_course, tmp_path):
    """A slow add (~0.6 s of CPU work) behind a cache keyed on its inputs' bytes: with one set per
    repetition the cache never answers a timed call, so the add is graded at its real speed (~0.0007x
    torch.add idle; load changing between the two timings moved the ratio up to 14x at 180 ms, still
    under the bar of 0.02x at 0.6 s): 0 of 2, and nothing claimed past a ceiling. With 2 sets over 16 repetitions it would have answered 14 of them and claimed
    ~8x its speed."""
    test = _graded_perf_test(demo_course, tmp_path, "timing_content_cache")
    assert test.score == 0 and test.status in ("passed", "failed"), (test.status, test.reason)
    assert test.metrics["add_vs_torch"] < 0.02, test.metrics
