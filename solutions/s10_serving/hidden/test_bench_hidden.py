"""Hidden: a benchmark through a burst at a higher rate, one request the server must refuse
(recorded as failed, the rest go on), and the summary of the client's own records."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import bench_in_worker, serving
from wire import check_records

N, RATE = 10, 60.0


@pytest.mark.points(2)
def test_burst_with_a_refused_request(tol):
    rng = np.random.default_rng(5)
    prompts = [rng.integers(2, 8192, int(n)).tolist() for n in rng.integers(4, 40, N)]
    outputs = rng.integers(2, 12, N).tolist()
    arrivals = np.cumsum(rng.exponential(1 / RATE, N)).tolist()
    prompts[4], outputs[4] = rng.integers(2, 8192, 250).tolist(), 10  # 250 + 10 > max_model_len 256: a 400
    with serving(max_model_len=256, num_kv_blocks=64) as port:
        before = time.perf_counter()
        records = bench_in_worker(port, prompts, outputs, arrivals)
        after = time.perf_counter()
    assert len(records) == N, f"{len(records)} records for {N} requests"
    assert records[4][5] is False, f"request 4 was refused (400) but its record says ok: {records[4]}"
    keep = [i for i in range(N) if i != 4]
    check_records([records[i] for i in keep], [prompts[i] for i in keep], [outputs[i] for i in keep],
                  [arrivals[i] for i in keep], before, after, tol("send schedule")["atol"])
