import time

import pytest

from autograder.timing import Timing, measure


def test_measure_honours_warmup_and_reps_on_cpu():
    calls = []
    timing = measure(lambda: calls.append(1), warmup=4, reps=7, device="cpu")
    assert len(calls) == 11 and timing.reps == 7
    assert timing.min_s <= timing.p10_s <= timing.median_s <= timing.p90_s


def test_timing_statistics_match_hand_computation():
    t = Timing.from_samples([3.0, 1.0, 2.0, 10.0])
    assert t.median_s == 2.5 and t.mean_s == 4.0 and t.min_s == 1.0
    assert t.stdev_s == pytest.approx(4.0824829, rel=1e-6)  # sample stdev of 1, 2, 3, 10


def test_measure_rejects_zero_reps():
    with pytest.raises(ValueError, match="reps"):
        measure(lambda: None, reps=0, device="cpu")


def test_cuda_graph_timing_is_ignored_on_cpu():
    calls = []
    timing = measure(lambda: calls.append(1), warmup=2, reps=5, device="cpu", cuda_graph=True)
    assert len(calls) == 7 and timing.reps == 5  # every call eager: no graph to capture on CPU


cuda = pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")


@cuda
def test_cuda_graph_timing_leaves_the_host_launch_work_out():
    import time

    import torch

    x = torch.ones(1024, device="cuda")

    def host_heavy():  # ~300 us of Python before a few microseconds of GPU work
        end = time.perf_counter() + 3e-4
        while time.perf_counter() < end:
            pass
        return x.mul(2)

    eager = measure(host_heavy, reps=10, flush_l2=False)
    graphed = measure(host_heavy, reps=10, flush_l2=False, cuda_graph=True)
    assert eager.median_s > 2.5e-4  # the spin shows in eager timing ...
    assert graphed.median_s < 1e-4  # ... and not in a graph replay (measured ~5 us on an H200)


@cuda
def test_a_call_that_cannot_be_captured_is_refused_with_the_reason():
    import torch

    x = torch.ones(8, device="cuda")
    with pytest.raises(RuntimeError, match="cannot be captured in a CUDA graph"):
        measure(lambda: x.sum().item(), reps=2, cuda_graph=True)  # .item() syncs with the host


@cuda
def test_the_last_replay_leaves_its_output_for_the_test_to_check():
    import torch

    x = torch.arange(4096.0, device="cuda")
    timing = measure(lambda: x * 2, reps=5, flush_l2=False, cuda_graph=True)
    assert torch.equal(timing.replayed, x * 2)


@cuda
def test_a_capture_that_records_less_than_the_call_shows_in_the_replayed_output():
    """A call that sees it is being captured and records a cheap fill instead of its work: every
    replay is fast and the eager call is right, but what the replays wrote is not."""
    import torch

    x = torch.arange(4096.0, device="cuda")

    def cheat():
        if torch.cuda.is_current_stream_capturing():
            return torch.zeros_like(x)
        return x * 2

    timing = measure(cheat, reps=5, flush_l2=False, cuda_graph=True)
    assert torch.equal(cheat(), x * 2) and not torch.equal(timing.replayed, x * 2)


def test_only_plain_tensors_are_copied_from_a_replay():
    """A look-alike with its own clone() would run the submission's code where nothing is accounted."""
    import torch

    from autograder.worker.feed import copy_of

    class LooksLikeATensor:
        is_cuda = True

        def clone(self):
            raise AssertionError("the submission's clone() was called")

    x = torch.arange(4.0)
    copied = copy_of((x, [x, LooksLikeATensor()]))
    assert torch.equal(copied[0], x) and copied[0].data_ptr() != x.data_ptr()
    assert torch.equal(copied[1][0], x) and copied[1][1] is None


@pytest.fixture
def check_all(monkeypatch):
    """The judge's draw of checked repetitions made deterministic: every one."""
    from autograder.worker import feed

    monkeypatch.setattr(feed, "pick_checked", lambda reps: list(range(reps)))


@cuda
def test_graph_replays_on_input_sets_are_each_rechecked(check_all):
    """The graph reads the static buffers: the set copied in before each replay is what it computes on."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    sets = [(torch.randn(4096, device="cuda", generator=g),) for _ in range(8)]
    seen = []

    def check(k, out):
        seen.append(k)
        assert torch.equal(out, sets[k][0] * 2), f"input set {k}: not 2x its input"

    timing = measure(lambda x: x * 2, reps=8, flush_l2=False, cuda_graph=True, inputs=sets, check=check)
    assert seen == [0, 1, 2, 3, 4, 5, 6, 7, 7] and len(timing.outputs) == 8  # each replay, then the last's


@cuda
def test_a_capture_that_records_a_copy_of_a_precomputed_answer_fails_on_the_next_set(check_all):
    """A call that sees it is being captured and records a copy of the answer it computed for the
    first set: the replays on sets 1-7 return set 0's answer."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    sets = [(torch.randn(4096, device="cuda", generator=g),) for _ in range(8)]
    answer = sets[0][0] * 2

    def cheat(x):
        return answer.clone() if torch.cuda.is_current_stream_capturing() else x * 2

    def check(k, out):
        assert torch.equal(out, sets[k][0] * 2), f"input set {k}: not 2x its input"

    with pytest.raises(AssertionError, match=r"timed repetition 1 \(input set 1\) is wrong"):
        measure(cheat, reps=8, flush_l2=False, cuda_graph=True, inputs=sets, check=check)


def test_each_repetition_runs_on_its_own_set_and_every_output_is_kept():
    """With as many sets as repetitions, the set of repetition i is in the buffers when it runs,
    and a copy of each repetition's output is kept (the call returns one tensor it rewrites)."""
    import torch

    from autograder.worker import timer
    from autograder.worker.feed import Feed

    sets = [(torch.full((4,), float(i)),) for i in range(6)]
    feed = Feed.of(sets[0])
    feed.rotate(sets)
    out, seen = torch.empty(4), []
    call = feed.bind(lambda x: (seen.append(float(x[0])), out.copy_(x + 1))[1])
    timer.samples(call, 6, False, "cpu", feed)
    assert seen == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert [float(feed.kept[i][0]) for i in range(6)] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert [float(o[0]) for o in feed.take([4, 1])] == [5.0, 2.0] and feed.kept == {}


def test_the_empty_loop_estimate_includes_copying_each_output():
    """The judge's estimate of the loop's own work copies an output shaped as the call's out of
    every repetition, as the worker does: 8 copies of 16 MB take milliseconds, far above the
    loop with nothing to copy (tolerance: 2x on a loaded host)."""
    import torch

    from autograder.judge import bracket

    sets = [(torch.full((4,), float(i)),) for i in range(8)]
    big = torch.ones(4 << 20)
    bare = bracket.empty_loop_s(8, False, "cpu", sets)
    copying = bracket.empty_loop_s(8, False, "cpu", sets, big)
    start = time.perf_counter()
    for _ in range(8):
        big.clone()
    direct = time.perf_counter() - start
    assert copying > bare + direct / 2, f"{copying * 1e3:.2f} ms with copies, {bare * 1e3:.2f} ms without"
