"""Simulator: the roofline step time, timelines worked out by hand, percentiles, the summary.

Hand-worked cost model (units chosen so times come out in round milliseconds):
  2 * num_params / flops_per_s = 1 ms per token fed; weight_bytes / bytes_per_s = 2 ms;
  kv_bytes_per_token / bytes_per_s = 0.5 ms per context token; overhead 1 ms.
  step = 1 ms + max(tokens * 1 ms, 2 ms + 0.5 ms * sum of context lengths).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import PROPERTY_SETTINGS
from kvcache import CostModel, SchedulerConfig, SimConfig, percentile, simulate, summarize

MS = 1e-3
HAND_COST = CostModel(num_params=0.5, weight_bytes=2.0, kv_bytes_per_token=0.5, flops_per_s=1000.0,
                      bytes_per_s=1000.0, overhead_s=1e-3)


def hand_config(**scheduler) -> SimConfig:
    sched = dict(max_num_seqs=4, max_num_batched_tokens=8, max_model_len=8, policy="decode_first",
                 enable_chunked_prefill=True)
    sched.update(scheduler)
    return SimConfig(scheduler=SchedulerConfig(**sched), num_blocks=8, block_size=4, watermark=0.0,
                     cost=HAND_COST)


@pytest.mark.points(2)
def test_single_request_timeline_by_hand():
    res = simulate([(0.0, 4, 3)], hand_config())
    # prefill 4 tokens: 1 + max(4, 2 + 0.5*4) = 5 ms; decodes with context 5 and 6:
    # 1 + max(1, 2 + 2.5) = 5.5 ms, then 1 + max(1, 2 + 3) = 6 ms
    assert [s.duration_s for s in res.steps] == pytest.approx([5 * MS, 5.5 * MS, 6 * MS], rel=1e-9)
    assert [s.start_s for s in res.steps] == pytest.approx([0.0, 5 * MS, 10.5 * MS], rel=1e-9, abs=1e-12)
    (r,) = res.requests
    assert r.ttft_s == pytest.approx(5 * MS, rel=1e-9)
    assert r.e2e_s == pytest.approx(16.5 * MS, rel=1e-9)
    assert r.tpot_s == pytest.approx((16.5 - 5) / 2 * MS, rel=1e-9)
    # 4 tokens fill block 1; the decodes at positions 4 and 5 need a second block
    assert [s.kv_blocks_used for s in res.steps] == [1, 2, 2]
    assert [(s.num_prefill_tokens, s.num_decode_tokens) for s in res.steps] == [(4, 0), (0, 1), (0, 1)]


@pytest.mark.points(2)
def test_batched_decode_reads_every_context_and_idle_time_is_skipped():
    res = simulate([(0.0, 2, 2), (0.0, 2, 2), (0.1, 2, 1)], hand_config())
    # both prompts in one step: 1 + max(4, 2 + 0.5*(2+2)) = 5 ms; one decode step for both:
    # 1 + max(2, 2 + 0.5*(3+3)) = 6 ms. The third request arrives at 100 ms to an idle engine:
    # 1 + max(2, 2 + 0.5*2) = 4 ms.
    assert [s.duration_s for s in res.steps] == pytest.approx([5 * MS, 6 * MS, 4 * MS], rel=1e-9)
    assert res.steps[2].start_s == pytest.approx(0.1, rel=1e-9)
    a, b, c = res.requests
    assert a.ttft_s == b.ttft_s == pytest.approx(5 * MS, rel=1e-9)
    assert a.tpot_s == pytest.approx(6 * MS, rel=1e-9)
    assert c.ttft_s == pytest.approx(4 * MS, rel=1e-9) and c.tpot_s is None
    s = summarize(res)
    assert s.makespan_s == pytest.approx(0.104, rel=1e-9)
    assert s.throughput_tok_s == pytest.approx(5 / 0.104, rel=1e-9)
    assert s.ttft_p50_s == pytest.approx(5 * MS, rel=1e-9)
    assert s.tpot_p99_s == pytest.approx(6 * MS, rel=1e-9)


@pytest.mark.points(1)
def test_kv_utilisation_is_time_weighted():
    res = simulate([(0.0, 4, 3)], hand_config())
    s = summarize(res)
    # blocks used 1, 2, 2 of 8 during steps of 5, 5.5 and 6 ms
    assert s.kv_util_mean == pytest.approx((5 * 1 + 5.5 * 2 + 6 * 2) / 16.5 / 8, rel=1e-9)
    assert s.kv_util_peak == pytest.approx(2 / 8, rel=1e-12)


@pytest.mark.points(1)
def test_step_time_is_compute_bound_for_prefill_and_memory_bound_for_decode():
    res = simulate([(0.0, 6, 2)], hand_config())
    prefill, decode = res.steps
    assert prefill.duration_s == pytest.approx(1 * MS + 6 * MS, rel=1e-9)  # 6 > 2 + 3
    assert decode.duration_s == pytest.approx(1 * MS + (2 + 0.5 * 7) * MS, rel=1e-9)  # 5.5 > 1


@pytest.mark.points(2)
@PROPERTY_SETTINGS
@given(values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50),
       q=st.floats(0.0, 100.0))
def test_percentile_matches_numpy_linear(values, q):
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-6)


@pytest.mark.points(1)
def test_percentile_rejects_bad_input():
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)
