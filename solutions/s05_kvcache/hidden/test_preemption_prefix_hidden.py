"""Memory pressure: preemption by recompute, then prefix-cache hits when the victim is re-admitted.

Pool: 4 blocks of 2 tokens. A = [1, 2, 3] and B = [4, 5, 6], 4 output tokens each, decode_first.
Worked by hand (free queue, least recently freed first, in brackets):
  step 0  A -> blocks [0, 1], B -> [2, 3]; both prefill 3 tokens and sample (10, 20).      [ ]
  step 1  both decode into their second block; blocks 0 (A) and 2 (B) are full: cached.   [ ]
  step 2  A needs a third block: B is preempted, its table freed tail first.           [3, 2]
          A takes block 3 (evicting B's cached [6, 20]).                                  [2]
  step 3  A decodes; B would hit block 2 ([4, 5]) but needs 3 blocks: 1 free. Waits.
          A finishes; its table [0, 1, 3] is freed tail first.                   [2, 3, 1, 0]
  step 4  B is re-admitted: hit block 2 leaves the queue FIRST, then fresh blocks 3 and 1.
          B recomputes positions 2..4 into slots (6, 7, 2).
"""

from __future__ import annotations

import random

import pytest

from conftest import drive, make_scheduler, random_prompts
from kvcache import Sequence, SequenceStatus


def pressure_scheduler(**overrides):
    cfg = dict(num_blocks=4, block_size=2, max_num_seqs=2, max_num_batched_tokens=8, max_model_len=8,
               policy="decode_first", enable_chunked_prefill=True)
    cfg.update(overrides)
    return make_scheduler(**cfg)


def entries(batch):
    return [(e.seq_id, e.start_pos, e.num_tokens, e.slot_mapping) for e in batch.entries]


@pytest.mark.points(4)
def test_preempted_sequence_hits_its_own_cached_prefix_on_readmission():
    sched = pressure_scheduler()
    a, b = Sequence(0, [1, 2, 3], 4), Sequence(1, [4, 5, 6], 4)
    sched.add(a)
    sched.add(b)
    s0 = sched.schedule()
    assert entries(s0) == [(0, 0, 3, (0, 1, 2)), (1, 0, 3, (4, 5, 6))]
    sched.update(s0, {0: 10, 1: 20})
    s1 = sched.schedule()
    assert entries(s1) == [(0, 3, 1, (3,)), (1, 3, 1, (7,))]
    sched.update(s1, {0: 11, 1: 21})
    s2 = sched.schedule()
    assert s2.preempted == (1,) and entries(s2) == [(0, 4, 1, (6,))]
    assert a.block_table == [0, 1, 3]
    sched.update(s2, {0: 12})
    s3 = sched.schedule()
    assert entries(s3) == [(0, 5, 1, (7,))] and b.status == SequenceStatus.WAITING
    assert sched.update(s3, {0: 13}) == [a]
    assert list(sched.block_manager.free_queue) == [2, 3, 1, 0]
    s4 = sched.schedule()
    assert b.block_table == [2, 3, 1] and b.num_cached_tokens == 2
    assert entries(s4) == [(1, 2, 3, (6, 7, 2))]
    sched.update(s4, {1: 22})
    s5 = sched.schedule()
    assert entries(s5) == [(1, 5, 1, (3,))]
    assert sched.update(s5, {1: 23}) == [b]
    assert b.completion_token_ids == [20, 21, 22, 23] and b.num_preemptions == 1
    bm = sched.block_manager
    assert bm.num_free_blocks == 4
    assert (bm.stats.num_queries, bm.stats.hit_tokens) == (3, 2)


@pytest.mark.points(2)
def test_preemption_then_readmission_keeps_the_kv_consistent():
    """The same workload through the checking driver (shadow KV, reference counts, pool whole)."""
    sched = pressure_scheduler()
    log = drive(sched, [Sequence(0, [1, 2, 3], 4), Sequence(1, [4, 5, 6], 4)], [0, 0])
    assert sum(len(b.preempted) for b in log.batches) == 1
    assert sched.block_manager.stats.hit_tokens == 2


@pytest.mark.points(3)
@pytest.mark.parametrize("seed", range(6))
def test_heavy_pressure_with_shared_prefixes_stays_consistent(seed):
    rng = random.Random(seed)
    sched = pressure_scheduler(num_blocks=7, block_size=2, max_num_seqs=3, max_num_batched_tokens=6,
                               max_model_len=14, policy=rng.choice(["decode_first", "prefill_first"]))
    prompts = random_prompts(rng, 8, 9, num_prefixes=1)
    seqs = [Sequence(i, p, rng.randint(3, 14 - len(p))) for i, p in enumerate(prompts)]
    log = drive(sched, seqs, [0] * 4 + [3] * 4)
    assert any(b.preempted for b in log.batches), "this workload is built to force preemption"
    assert all(s.num_preemptions >= 0 for s in seqs)


@pytest.mark.points(2)
def test_victim_goes_back_ahead_of_later_arrivals():
    sched = pressure_scheduler()
    a, b, c = Sequence(0, [1, 2, 3], 4), Sequence(1, [4, 5, 6], 4), Sequence(2, [7], 1)
    for seq in (a, b):
        sched.add(seq)
    sched.update(sched.schedule(), {0: 10, 1: 20})
    sched.update(sched.schedule(), {0: 11, 1: 21})
    sched.add(c)  # arrives before the preemption
    s2 = sched.schedule()
    assert s2.preempted == (1,) and [e.seq_id for e in s2.entries] == [0]
    assert list(sched.waiting) == [b, c]  # the victim goes back to the front
