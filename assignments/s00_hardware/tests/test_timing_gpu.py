"""GPU tier: the student's timer and ceilings agree with the course timer, measured in the same run.

Here the course timer times only the judge's own GEMM and copy, in the judge: its median is its
own (no bracket, no rotation needed), compared with the median the student's benchmark reports."""

import statistics  # noqa: I001 (the grader's imports before the package's)
import time

import pytest
import torch
from autograder.testing import in_worker

from hwnumerics import benchmark, copy_bandwidth, gemm_tflops

# Back-to-back measurements of the same kernel on one GPU agree to a few percent; a timer that
# reads the CPU clock without synchronising measures the launch (~10 us) and misses by >10x.
AGREEMENT = 0.10


def bf16_operands(n):
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return a, b


@in_worker
def worker_gemm(n):
    """In the worker: `a @ b` on operands made there, as a call without arguments. The package's
    benchmark must time work in its own process (a judge lambda would run in the judge, on other
    CUDA streams than the events the benchmark records)."""
    a, b = bf16_operands(n)
    return lambda: a @ b


@pytest.mark.gpu
@pytest.mark.points(3)
def test_benchmark_agrees_with_course_timer_on_a_gemm():
    from autograder.timing import measure

    a, b = bf16_operands(4096)
    ref = measure(lambda: a @ b, warmup=5, reps=50).median_s
    ours = benchmark(worker_gemm(4096), warmup=5, reps=50, flush_l2=True, device="cuda").median_s
    assert ours == pytest.approx(ref, rel=AGREEMENT), f"ours {ours * 1e6:.1f} us vs course {ref * 1e6:.1f} us"


@pytest.mark.gpu
@pytest.mark.points(2)
def test_copy_bandwidth_agrees_with_course_timer():
    from autograder.timing import copy_bandwidth as course_copy_bandwidth

    nbytes = 1 << 30  # 1 GiB: far past L2, the copy streams HBM
    ref = course_copy_bandwidth(nbytes, device="cuda", warmup=3, reps=20)
    ours = copy_bandwidth(nbytes, device="cuda", warmup=3, reps=20)
    msg = f"ours {ours / 1e12:.2f} vs course {ref / 1e12:.2f} TB/s"
    assert ours == pytest.approx(ref, rel=AGREEMENT), msg


@pytest.mark.gpu
@pytest.mark.points(2)
def test_gemm_tflops_agrees_with_course_timer():
    # An 8192^3 bf16 GEMM runs the H200 at its power limit: clocks sag for the first second or so
    # of load, then settle. Timed one after the other from a cold start, the second measurement
    # was up to 12% slower (701 vs 792 TFLOP/s). So the GPU is first loaded for a second with the
    # same GEMM, then both timers measure the same size and reps in interleaved rounds, and the
    # medians over the rounds are compared: drift hits both alike. Measured this way on an H200
    # (2026-12-01, 12 runs of this test): ratio ours/course 0.995-1.012, so AGREEMENT = 0.10 leaves
    # a wide margin for the reference while a timer that skips synchronisation still misses by >10x.
    from autograder.timing import measure

    n, rounds = 8192, 5
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    settle_until = time.perf_counter() + 1.0
    while time.perf_counter() < settle_until:
        torch.matmul(a, b)
        torch.cuda.synchronize()
    ours, ref = [], []
    for _ in range(rounds):
        ref.append(2 * n**3 / measure(lambda: torch.matmul(a, b), warmup=3, reps=20).median_s / 1e12)
        ours.append(gemm_tflops(n, torch.bfloat16, device="cuda", warmup=3, reps=20))
    ours_tf, ref_tf = statistics.median(ours), statistics.median(ref)
    print(f"gemm_tflops ratio ours/course {ours_tf / ref_tf:.4f} (ours {ours_tf:.0f}, course {ref_tf:.0f} TFLOP/s)")
    assert ours_tf == pytest.approx(ref_tf, rel=AGREEMENT), f"ours {ours_tf:.0f} vs course {ref_tf:.0f} TFLOP/s"
