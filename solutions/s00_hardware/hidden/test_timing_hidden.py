"""Hidden: statistics edge cases, warm-up excluded, the FLOP/byte counts of the ceilings, and (GPU)
a physics check on the measured copy bandwidth."""

import random  # noqa: I001 (the grader's imports before the package's)
import statistics
import time

import numpy as np
import pytest
import torch
from autograder.testing import in_worker

import hwnumerics.microbench as microbench  # noqa: PLR0402 (the judge imports the submodule by path)
from hwnumerics import H100_SXM, H200, BenchStats, benchmark, copy_bandwidth, gemm_tflops, summarize


@pytest.mark.points(1)
def test_median_of_an_even_count_is_the_mean_of_the_middle_two():
    s = summarize([4.0, 1.0, 3.0, 2.0])
    assert s.median_s == 2.5
    assert s.p10_s == pytest.approx(float(np.percentile([4.0, 1.0, 3.0, 2.0], 10)), rel=1e-12)


@pytest.mark.points(1)
def test_median_resists_one_outlier_unlike_mean():
    times = [0.001] * 9 + [1.0]  # one rep hit by a context switch
    s = summarize(times)
    assert s.median_s == pytest.approx(0.001, rel=1e-12)
    assert s.mean_s == pytest.approx(statistics.mean(times), rel=1e-12)
    assert s.stdev_s == pytest.approx(statistics.stdev(times), rel=1e-9)


IDENTICAL = [(0.1, 10), (1e-3, 20), (2.5e-4, 50), (7e-3, 100), (1e6 + 0.1, 7)]  # (value, reps)


@pytest.mark.points(1)
def test_identical_timings_have_zero_spread():
    # statistics.stdev gives exactly 0. A two-pass sum of squared deviations from the mean leaves at
    # most the rounding of the mean (~1e-16 relative); E[x^2] - E[x]^2 cancels catastrophically and
    # leaves ~1e-8 relative, or a negative variance (whose square root does not exist).
    for value, reps in IDENTICAL:
        s = summarize([value] * reps)
        assert statistics.stdev([value] * reps) == 0.0
        assert 0.0 <= s.stdev_s <= 1e-12 * value, f"{reps} x {value}: stdev {s.stdev_s!r}"
        assert s.mean_s == pytest.approx(value, rel=1e-12)
        assert s.median_s == s.min_s == s.max_s == s.p10_s == s.p90_s == value


@pytest.mark.points(1)
def test_spread_of_timings_with_a_large_offset_matches_statistics():
    # Small differences on top of a large common value: the spread must come from the differences.
    # Oracles: statistics.stdev (exact rational arithmetic on the same doubles) and numpy's two-pass.
    gen = random.Random(11)
    for offset, noise in [(1e6, 1e-3), (1e3, 1e-6)]:
        times = [offset + gen.uniform(0.0, noise) for _ in range(25)]
        s = summarize(times)
        assert s.stdev_s == pytest.approx(statistics.stdev(times), rel=1e-6), f"offset {offset}, noise {noise}"
        assert s.stdev_s == pytest.approx(float(np.std(times, ddof=1)), rel=1e-6)
        assert s.mean_s == pytest.approx(statistics.mean(times), rel=1e-12)


@pytest.mark.points(1)
def test_summarize_single_rep_and_empty_input():
    s = summarize([0.25])
    assert (s.median_s, s.mean_s, s.stdev_s, s.p10_s, s.p90_s) == (0.25, 0.25, 0.0, 0.25, 0.25)
    with pytest.raises(ValueError):
        summarize([])


@pytest.mark.points(1)
def test_benchmark_rejects_bad_counts():
    assert benchmark(lambda: None, warmup=0, reps=1, device="cpu").reps == 1
    with pytest.raises(ValueError):
        benchmark(lambda: None, warmup=-1, reps=5, device="cpu")
    with pytest.raises(ValueError):
        benchmark(lambda: None, warmup=1, reps=0, device="cpu")


@in_worker
def benchmark_under_fake_clock(durations, *, warmup, reps):
    """In the worker (the package reads the worker's `time`): benchmark(fn) where each call of fn
    advances a fake time.perf_counter by the next duration; the real clock is back on return."""
    now = [0.0]
    durations = iter(durations)

    def fn():
        now[0] += next(durations)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(time, "perf_counter", lambda: now[0])
        return benchmark(fn, warmup=warmup, reps=reps, device="cpu")


@pytest.mark.points(2)
def test_warmup_calls_do_not_enter_the_statistics():
    s = benchmark_under_fake_clock([50.0, 50.0, 50.0] + [0.002, 0.001, 0.003, 0.002], warmup=3, reps=4)
    assert s.max_s == pytest.approx(0.003, abs=1e-9)
    assert s.median_s == pytest.approx(0.002, abs=1e-9)
    assert s.stdev_s == pytest.approx(statistics.stdev([0.002, 0.001, 0.003, 0.002]), rel=1e-6)


def fake_benchmark(median_s: float, seen: list):
    """Stands in for microbench.benchmark: runs fn once (it must work), reports a fixed median."""

    def bench(fn, *, warmup=3, reps=20, flush_l2=True, device=None):
        fn()
        seen.append({"warmup": warmup, "reps": reps, "flush_l2": flush_l2, "device": device})
        return BenchStats((median_s,), median_s, median_s, 0.0, median_s, median_s, median_s, median_s)

    return bench


@pytest.mark.points(2)
def test_copy_bandwidth_counts_bytes_read_plus_written(monkeypatch):
    seen = []
    monkeypatch.setattr(microbench, "benchmark", fake_benchmark(1e-3, seen))
    bw = copy_bandwidth(1 << 20, device="cpu", warmup=2, reps=7)
    assert bw == pytest.approx(2 * (1 << 20) / 1e-3, rel=1e-12)  # 2.1e9 B/s
    assert seen and seen[0]["warmup"] == 2 and seen[0]["reps"] == 7
    # A ceiling measured with a warm L2 is not the HBM ceiling: the contract is flush_l2=True.
    assert seen[0]["flush_l2"] is True, "copy_bandwidth must call benchmark with flush_l2=True"


@pytest.mark.points(2)
def test_gemm_tflops_counts_2n_cubed(monkeypatch):
    seen = []
    monkeypatch.setattr(microbench, "benchmark", fake_benchmark(0.5, seen))
    tflops = gemm_tflops(64, torch.float32, device="cpu", warmup=1, reps=3)
    assert tflops == pytest.approx(2 * 64**3 / 0.5 / 1e12, rel=1e-12)
    assert seen and seen[0]["reps"] == 3
    assert seen[0]["flush_l2"] is True, "gemm_tflops must call benchmark with flush_l2=True"


@pytest.mark.points(1)
def test_cpu_ceilings_are_positive_and_finite():
    # Real timing, no bound on the value (machines differ): only that the pipeline produces one.
    assert 0 < copy_bandwidth(1 << 16, device="cpu", warmup=1, reps=3) < float("inf")
    assert 0 < gemm_tflops(32, torch.float32, device="cpu", warmup=1, reps=3) < float("inf")


DATASHEETS = {"h100": H100_SXM, "h200": H200}


@pytest.mark.gpu
@pytest.mark.points(1)
def test_measured_copy_bandwidth_does_not_beat_the_datasheet():
    from autograder.hardware import hardware_tag

    spec = DATASHEETS.get(hardware_tag())
    if spec is None:
        pytest.skip(f"no datasheet for {hardware_tag()}")
    bw = copy_bandwidth(1 << 30, device="cuda", warmup=3, reps=20)
    # HBM cannot move bytes faster than its datasheet rate; a timer that misses work reports more.
    assert 0.3 * spec.mem_bw < bw <= 1.02 * spec.mem_bw, f"{bw / 1e12:.2f} TB/s on {spec.name}"
