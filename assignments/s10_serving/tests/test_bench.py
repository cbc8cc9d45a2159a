"""The benchmark client against a running server: open-loop sends at the arrival times, a record
per request whose token counts match what was asked and whose times lie inside the judge's own
clock readings around the run (time.perf_counter is the machine's monotonic clock in both
processes), and a summary equal to the grader's own formulas on those records."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import bench_in_worker, serving
from wire import check_records

N, RATE = 8, 25.0


def workload(seed: int) -> tuple[list[list[int]], list[int], list[float]]:
    """Prompt ids, output lengths and Poisson arrivals drawn here (the judge)."""
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(2, 8192, int(n)).tolist() for n in rng.integers(4, 48, N)]
    outputs = rng.integers(2, 16, N).tolist()
    arrivals = np.cumsum(rng.exponential(1 / RATE, N)).tolist()
    return prompts, outputs, arrivals


@pytest.mark.points(3)
def test_benchmark_records_follow_the_schedule(tol):
    prompts, outputs, arrivals = workload(11)
    with serving(max_model_len=256, num_kv_blocks=64) as port:
        before = time.perf_counter()
        records = bench_in_worker(port, prompts, outputs, arrivals)
        after = time.perf_counter()
    check_records(records, prompts, outputs, arrivals, before, after, tol("send schedule")["atol"])
