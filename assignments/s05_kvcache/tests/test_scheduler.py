"""Scheduler: schedules worked out by hand, then invariants on random workloads.

The hand-worked cases use block_size 4 and 8 blocks; fresh blocks come from the front of the free
queue (0, 1, 2, ... at start) and a freed table goes to its back, last block first.
"""

from __future__ import annotations

import random

import pytest
from autograder.testing import in_worker
from hypothesis import given
from hypothesis import strategies as st

from conftest import PROPERTY_SETTINGS, drive, make_scheduler, random_prompts
from kvcache import Sequence, SequenceStatus, slot_mapping


def entries(batch):
    """(seq_id, start_pos, num_tokens, is_prefill, samples, slot_mapping) per entry."""
    return [(e.seq_id, e.start_pos, e.num_tokens, e.is_prefill, e.samples, e.slot_mapping) for e in batch.entries]


def two_requests():
    return Sequence(0, [1, 2, 3, 4, 5], max_tokens=2), Sequence(1, [6, 7, 8], max_tokens=1)


@pytest.mark.points(1)
def test_slot_mapping_follows_the_block_table():
    assert slot_mapping([5, 2, 7], 3, 4, 4) == (23, 8, 9, 10)
    assert slot_mapping([3, 9], 0, 2, 1) == (3, 9)  # block_size 1: one slot per block
    with pytest.raises(ValueError):
        slot_mapping([0], 2, 3, 4)  # positions 2..4 need two blocks


@pytest.mark.points(3)
def test_decode_first_chunked_schedule_by_hand():
    sched = make_scheduler(num_blocks=8, block_size=4, max_num_seqs=2, max_num_batched_tokens=6,
                           max_model_len=12, policy="decode_first", enable_chunked_prefill=True)
    a, b = two_requests()
    sched.add(a)
    sched.add(b)
    step0 = sched.schedule()
    # A takes blocks [0, 1] and its whole prompt (5); B takes block [2] and the 1 token left
    assert entries(step0) == [(0, 0, 5, True, True, (0, 1, 2, 3, 4)), (1, 0, 1, True, False, (8,))]
    assert sched.update(step0, {0: 100}) == []
    assert a.num_computed_tokens == 5 and b.num_computed_tokens == 1 and a.token_ids[-1] == 100
    step1 = sched.schedule()
    # decodes first (A feeds token 100 at position 5, slot 1*4+1), then B's remaining 2 tokens
    assert entries(step1) == [(0, 5, 1, False, True, (5,)), (1, 1, 2, True, True, (9, 10))]
    finished = sched.update(step1, {0: 101, 1: 200})
    assert finished == [a, b] and a.status == b.status == SequenceStatus.FINISHED
    assert a.completion_token_ids == [100, 101] and b.completion_token_ids == [200]
    assert sched.block_manager.num_free_blocks == 8 and not sched.has_unfinished()
    # A's first block [1, 2, 3, 4] stayed cached; its second block was never full
    c = Sequence(2, [1, 2, 3, 4, 5, 6, 7, 8, 9], max_tokens=1)
    sched.add(c)
    step2 = sched.schedule()
    assert c.block_table == [0, 3, 4] and c.num_cached_tokens == 4
    assert entries(step2) == [(2, 4, 5, True, True, (12, 13, 14, 15, 16))]


@pytest.mark.points(2)
def test_prefill_first_keeps_prefill_and_decode_apart():
    sched = make_scheduler(num_blocks=8, block_size=4, max_num_seqs=2, max_num_batched_tokens=6,
                           max_model_len=8, policy="prefill_first", enable_chunked_prefill=True)
    a, b = two_requests()
    sched.add(a)
    sched.add(b)
    step0 = sched.schedule()
    assert entries(step0) == [(0, 0, 5, True, True, (0, 1, 2, 3, 4)), (1, 0, 1, True, False, (8,))]
    sched.update(step0, {0: 100})
    step1 = sched.schedule()  # B's prefill chunk runs alone; A's decode waits
    assert entries(step1) == [(1, 1, 2, True, True, (9, 10))]
    assert sched.update(step1, {1: 200}) == [b]
    step2 = sched.schedule()
    assert entries(step2) == [(0, 5, 1, False, True, (5,))]
    assert sched.update(step2, {0: 101}) == [a]


@pytest.mark.points(2)
def test_without_chunking_a_prompt_waits_for_a_step_with_room():
    sched = make_scheduler(num_blocks=8, block_size=4, max_num_seqs=4, max_num_batched_tokens=8,
                           max_model_len=8, policy="decode_first", enable_chunked_prefill=False)
    a, b = Sequence(0, [1, 2, 3, 4, 5], 2), Sequence(1, [6, 7, 8, 9], 1)
    sched.add(a)
    sched.add(b)
    step0 = sched.schedule()
    assert [(e.seq_id, e.num_tokens) for e in step0.entries] == [(0, 5)]  # B's 4 tokens do not fit in 3
    sched.update(step0, {0: 100})
    step1 = sched.schedule()
    assert [(e.seq_id, e.start_pos, e.num_tokens) for e in step1.entries] == [(0, 5, 1), (1, 0, 4)]
    with pytest.raises(ValueError):
        sched.add(Sequence(2, list(range(7)), 2))  # 7 + 2 > max_model_len


@pytest.mark.points(3)
def test_preemption_victim_is_the_most_recently_admitted():
    sched = make_scheduler(num_blocks=4, block_size=2, max_num_seqs=2, max_num_batched_tokens=8,
                           max_model_len=8, policy="decode_first", enable_chunked_prefill=True)
    a, b = Sequence(0, [1, 2, 3], 4), Sequence(1, [4, 5, 6], 4)
    sched.add(a)
    sched.add(b)
    sched.update(sched.schedule(), {0: 10, 1: 20})  # tables [0, 1] and [2, 3]: pool full
    sched.update(sched.schedule(), {0: 11, 1: 21})  # both decode into their second blocks
    step2 = sched.schedule()  # A needs a third block: B (admitted after A) is preempted
    assert step2.preempted == (1,)
    assert b.status == SequenceStatus.WAITING and b.block_table == [] and b.num_computed_tokens == 0
    assert b.token_ids == [4, 5, 6, 20, 21] and b.num_preemptions == 1  # generated tokens are kept
    assert [(e.seq_id, e.start_pos) for e in step2.entries] == [(0, 4)]
    assert list(sched.waiting) == [b] and sched.running == [a]


_workload = st.fixed_dictionaries(
    {
        "block_size": st.sampled_from([1, 2, 4]),
        "max_num_seqs": st.integers(2, 4),
        "max_model_len": st.integers(4, 24),
        "policy": st.sampled_from(["prefill_first", "decode_first"]),
        "chunked": st.booleans(),
        "static": st.booleans(),
        "caching": st.booleans(),
        "extra_blocks": st.integers(0, 4),
        "extra_budget": st.integers(0, 12),
        "n": st.integers(3, 8),
        "seed": st.integers(0, 10_000),
    }
)


@in_worker
def build_workload(w):
    """A scheduler and requests from a drawn workload, built in the worker in one request (the
    judge gets proxies): the scheduler, the sequences and their arrival steps."""
    rng = random.Random(w["seed"])
    min_budget = w["max_num_seqs"] if w["chunked"] else max(w["max_num_seqs"], w["max_model_len"])
    sched = make_scheduler(
        num_blocks=-(-w["max_model_len"] // w["block_size"]) + w["extra_blocks"],
        block_size=w["block_size"],
        prefix_caching=w["caching"],
        max_num_seqs=w["max_num_seqs"],
        max_num_batched_tokens=min_budget + w["extra_budget"],
        max_model_len=w["max_model_len"],
        policy=w["policy"],
        enable_chunked_prefill=w["chunked"],
        static_batching=w["static"],
    )
    prompts = random_prompts(rng, w["n"], w["max_model_len"] - 1)
    seqs = [Sequence(i, p, rng.randint(1, w["max_model_len"] - len(p))) for i, p in enumerate(prompts)]
    return sched, seqs, [rng.randrange(0, 6) for _ in seqs]


def run_workload(w, *, max_steps=5000):
    """Build a scheduler and requests from a drawn workload and drive them to completion."""
    sched, seqs, arrivals = build_workload(w)
    return sched, drive(sched, seqs, arrivals, max_steps=max_steps)


@pytest.mark.points(4)
@PROPERTY_SETTINGS
@given(w=_workload)
def test_invariants_hold_on_random_workloads(w):
    """Every step: budget and max_num_seqs respected, slot mapping injective, writes only to
    exclusively owned blocks, shadow KV intact; at the end: every request done with its tokens,
    FCFS admission order, and free blocks back to the initial count."""
    run_workload(w)


@pytest.mark.points(2)
@PROPERTY_SETTINGS
@given(w=_workload)
def test_no_request_starves_under_memory_pressure(w):
    """With the smallest pool that holds one max_model_len sequence, everything still finishes."""
    w = dict(w, extra_blocks=0, n=6)
    sched, log = run_workload(w, max_steps=2000)
    assert sched.num_steps == len(log.batches)
