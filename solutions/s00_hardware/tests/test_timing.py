"""The benchmark helper on CPU: warm-up honoured, every rep timed with perf_counter, right statistics."""

import math
import statistics  # noqa: I001 (the grader's imports before the package's)
import time

import numpy as np
import pytest
import torch
from autograder.testing import in_worker

from hwnumerics import benchmark, copy_bandwidth, gemm_tflops, summarize


@pytest.mark.points(2)
def test_summarize_matches_statistics_and_numpy():
    times = [0.012, 0.010, 0.011, 0.030, 0.009, 0.010, 0.013]
    s = summarize(times)
    assert s.times_s == tuple(times) and s.reps == 7
    assert s.median_s == pytest.approx(statistics.median(times), rel=1e-12)
    assert s.mean_s == pytest.approx(statistics.mean(times), rel=1e-12)
    assert s.stdev_s == pytest.approx(statistics.stdev(times), rel=1e-9)  # sample (n - 1)
    assert (s.min_s, s.max_s) == (0.009, 0.030)
    assert s.p10_s == pytest.approx(float(np.percentile(times, 10)), rel=1e-12)
    assert s.p90_s == pytest.approx(float(np.percentile(times, 90)), rel=1e-12)


@pytest.mark.points(1)
def test_benchmark_calls_fn_warmup_plus_reps_times():
    calls = []
    s = benchmark(lambda: calls.append(1), warmup=3, reps=7, device="cpu")
    assert len(calls) == 10
    assert s.reps == 7


class FakeClock:
    """time.perf_counter replacement that only advances when the benchmarked fn runs."""

    def __init__(self, durations):
        self.now = 100.0
        self.durations = list(durations)
        self.calls = 0

    def perf_counter(self):
        return self.now

    def fn(self):
        self.now += self.durations[self.calls]
        self.calls += 1


@in_worker
def benchmark_under_fake_clock(durations, *, warmup, reps):
    """In the worker (the package reads the worker's `time`): benchmark(clock.fn) with
    time.perf_counter replaced by the fake clock for the call, restored before returning."""
    clock = FakeClock(durations)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(time, "perf_counter", clock.perf_counter)
        return benchmark(clock.fn, warmup=warmup, reps=reps, device="cpu")


@pytest.mark.points(2)
def test_benchmark_times_each_rep_with_perf_counter():
    # 2 warm-up calls (slow: 5 s) then 5 timed calls of known length
    s = benchmark_under_fake_clock([5.0, 5.0, 0.004, 0.001, 0.003, 0.002, 0.005], warmup=2, reps=5)
    assert s.times_s == pytest.approx((0.004, 0.001, 0.003, 0.002, 0.005), abs=1e-9)
    assert s.median_s == pytest.approx(0.003, abs=1e-9)
    assert s.min_s == pytest.approx(0.001, abs=1e-9)


@pytest.mark.points(1)
def test_the_two_microbenchmarks_run_on_the_cpu_and_return_finite_rates():
    # tiny sizes: the numbers mean little on a CPU, but both must run and give a positive, finite rate
    bw = copy_bandwidth(1 << 16, device="cpu", warmup=1, reps=3)
    tf = gemm_tflops(32, torch.float32, device="cpu", warmup=1, reps=3)
    assert math.isfinite(bw) and bw > 0, f"copy_bandwidth gave {bw}"
    assert math.isfinite(tf) and tf > 0, f"gemm_tflops gave {tf}"
