"""Simulator: the three policies on one timeline worked by hand, long prompts, preemption, caching.

Same hand cost model as the public tests: step = 1 ms + max(tokens * 1 ms, 2 ms + 0.5 ms * sum of
context lengths). R0 = (0 ms, 4 prompt, 3 out); R1 = (6 ms, 2 prompt, 1 out).
  all policies: step 0 prefills R0 (5 ms); R1 has not arrived at 5 ms; step 1 decodes R0 (5.5 ms).
  static:      R1 waits for R0: decode 6 ms -> 16.5; R1 prefill 4 ms -> TTFT 20.5 - 6 = 14.5 ms.
  continuous:  prefill-only step for R1 at 10.5: 4 ms -> TTFT 8.5 ms; R0 decodes at 14.5: 6 ms -> 20.5.
  chunked:     R0 decode + R1 prefill in one step at 10.5: 1 + max(3, 2 + 0.5 * (6 + 2)) = 7 ms
               -> R1 TTFT 11.5 ms, R0 done at 17.5.
"""

from __future__ import annotations

import math
import random

import pytest

from kvcache import CostModel, SchedulerConfig, SimConfig, SimResult, simulate, summarize

MS = 1e-3
HAND_COST = CostModel(num_params=0.5, weight_bytes=2.0, kv_bytes_per_token=0.5, flops_per_s=1000.0,
                      bytes_per_s=1000.0, overhead_s=1e-3)
POLICIES = {
    "static": dict(policy="prefill_first", enable_chunked_prefill=False, static_batching=True),
    "continuous": dict(policy="prefill_first", enable_chunked_prefill=False),
    "chunked": dict(policy="decode_first", enable_chunked_prefill=True),
}


def config(name, **overrides) -> SimConfig:
    sched = dict(max_num_seqs=4, max_num_batched_tokens=8, max_model_len=8, **POLICIES[name])
    sim = dict(num_blocks=8, block_size=4, watermark=0.0, cost=HAND_COST)
    sim.update(overrides)
    return SimConfig(scheduler=SchedulerConfig(**sched), **sim)


@pytest.mark.points(3)
@pytest.mark.parametrize(
    "name,ttft1_ms,finish0_ms", [("static", 14.5, 16.5), ("continuous", 8.5, 20.5), ("chunked", 11.5, 17.5)]
)
def test_three_policies_on_a_timeline_worked_by_hand(name, ttft1_ms, finish0_ms):
    r0, r1 = simulate([(0.0, 4, 3), (0.006, 2, 1)], config(name)).requests
    assert r0.ttft_s == pytest.approx(5 * MS, rel=1e-9)
    assert r1.ttft_s == pytest.approx(ttft1_ms * MS, rel=1e-9)
    assert r0.e2e_s == pytest.approx(finish0_ms * MS, rel=1e-9)
    assert r0.tpot_s == pytest.approx((finish0_ms - 5) / 2 * MS, rel=1e-9)


@pytest.mark.points(2)
def test_long_prompt_ttft_sums_its_chunks():
    cfg = SimConfig(
        scheduler=SchedulerConfig(max_num_seqs=2, max_num_batched_tokens=8, max_model_len=24),
        num_blocks=8, block_size=4, watermark=0.0, cost=HAND_COST,
    )
    (r,) = simulate([(0.0, 20, 1)], cfg).requests
    # chunks of 8, 8, 4 with contexts 8, 16, 20: 1 + max(8, 6) + 1 + max(8, 10) + 1 + max(4, 12)
    assert r.ttft_s == pytest.approx((9 + 11 + 13) * MS, rel=1e-9)
    assert r.tpot_s is None


@pytest.mark.points(2)
def test_shared_system_prompt_is_served_from_the_prefix_cache():
    cfg = config("chunked", shared_prefix_len=8)
    res = simulate([(0.0, 6, 1), (0.0, 2, 1), (1.0, 6, 1)], cfg)  # prompts hold 6, 2, 6 of the 8
    # only the third request finds cached blocks: block [0:4) of the first request (1 block)
    assert res.prefix_hit_rate == pytest.approx(4 / 14, rel=1e-12)
    assert summarize(res).prefix_hit_rate == res.prefix_hit_rate


@pytest.mark.points(2)
def test_memory_pressure_counts_preemptions_and_finishes_everything():
    rng = random.Random(3)
    trace = [(0.001 * i, rng.randint(4, 10), rng.randint(4, 6)) for i in range(12)]
    cfg = SimConfig(
        scheduler=SchedulerConfig(max_num_seqs=6, max_num_batched_tokens=16, max_model_len=16),
        num_blocks=8, block_size=2, watermark=0.0, cost=HAND_COST,
    )
    res = simulate(trace, cfg)
    s = summarize(res)
    assert s.num_requests == 12 and all(r.output_len == t[2] for r, t in zip(res.requests, trace))
    assert s.num_preemptions == sum(r.num_preemptions for r in res.requests) > 0
    assert s.num_preemptions == sum(st.num_preempted for st in res.steps)
    assert s.kv_util_peak == max(st.kv_blocks_used for st in res.steps) / 8 <= 1.0
    total = sum(st.num_decode_tokens + st.num_prefill_tokens for st in res.steps)
    assert total >= sum(t[1] + t[2] - 1 for t in trace)  # recompute only adds work


@pytest.mark.points(1)
def test_summary_of_an_empty_run_is_an_error_and_unsorted_traces_are_sorted():
    with pytest.raises(ValueError):
        summarize(SimResult((), (), 8, 0.0))
    res = simulate([(0.01, 2, 1), (0.0, 2, 1)], config("chunked"))
    assert [r.arrival_s for r in res.requests] == [0.0, 0.01]
    assert all(math.isfinite(r.ttft_s) and r.ttft_s > 0 for r in res.requests)
    empty = simulate([], config("chunked"))  # an empty trace: nothing to replay, no error
    assert tuple(empty.requests) == () and tuple(empty.steps) == ()


@pytest.mark.points(1)
def test_a_trace_of_300_requests_is_replayed_whole():
    """More requests than Python interns small ints for: the loop compares counts, not identities."""
    trace = [(0.0005 * i, 1 + i % 3, 1 + i % 2) for i in range(300)]
    res = simulate(trace, config("chunked", num_blocks=64))
    assert len(res.requests) == 300 and [r.output_len for r in res.requests] == [t[2] for t in trace]
