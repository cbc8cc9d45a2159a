"""Bursty arrivals: many requests in the same step, then quiet, under every policy."""

from __future__ import annotations

import random

import pytest

from conftest import drive, make_scheduler, random_prompts
from kvcache import Sequence

POLICIES = [
    ("decode_first", True, False),
    ("prefill_first", True, False),
    ("prefill_first", False, False),
    ("decode_first", False, False),
    ("prefill_first", False, True),  # static batching
]


def bursty(seed: int, max_model_len: int):
    rng = random.Random(seed)
    prompts = random_prompts(rng, 14, max_model_len - 4, num_prefixes=2)
    seqs = [Sequence(i, p, rng.randint(1, max_model_len - len(p))) for i, p in enumerate(prompts)]
    arrivals = [0] * 6 + [1] * 4 + [30] * 4  # two bursts back to back, then a late one
    return seqs, arrivals


def checks_for(policy, chunked, static):
    sealed = [False]  # static batching: the current batch has decoded at least once

    def hook(batch, before):
        scheduled = {e.seq_id for e in batch.entries}
        decoding = [s for s, prefill in before.items() if not prefill]
        if policy == "decode_first":
            # a decoding sequence is never skipped: it runs or it was preempted
            for s in decoding:
                assert s in scheduled or s in batch.preempted, f"decode of seq {s} stalled"
        elif any(e.is_prefill for e in batch.entries):
            # no running decode rides along a prefill step (a re-admitted sequence whose cache
            # hits leave one token to compute looks like a decode, but it is an admission)
            for e in batch.entries:
                assert e.is_prefill or e.seq_id not in before, "prefill_first mixed prefill and decode"
        if static:
            if not before:
                sealed[0] = False
            admitted = scheduled - set(before)
            assert not (sealed[0] and admitted), "static batching admitted a request into a decoding batch"
            sealed[0] = sealed[0] or any(not e.is_prefill for e in batch.entries)

    return hook


@pytest.mark.points(2)
@pytest.mark.parametrize("policy,chunked,static", POLICIES)
@pytest.mark.parametrize("seed", [0, 1])
def test_bursts_are_served_with_all_invariants(policy, chunked, static, seed):
    max_model_len = 20
    sched = make_scheduler(num_blocks=14, block_size=4, max_num_seqs=4,
                           max_num_batched_tokens=20 if not chunked else 7, max_model_len=max_model_len,
                           policy=policy, enable_chunked_prefill=chunked, static_batching=static)
    seqs, arrivals = bursty(seed, max_model_len)
    drive(sched, seqs, arrivals, hook=checks_for(policy, chunked, static))


@pytest.mark.points(2)
def test_burst_larger_than_max_num_seqs_is_admitted_in_arrival_order():
    sched = make_scheduler(num_blocks=64, block_size=4, max_num_seqs=2, max_num_batched_tokens=16,
                           max_model_len=16, policy="decode_first", enable_chunked_prefill=True)
    seqs = [Sequence(i, [10 * i + 1, 10 * i + 2], 2) for i in range(5)]
    log = drive(sched, seqs, [0] * 5)
    assert log.first_seen == [0, 1, 2, 3, 4]
    # at most two run at once: the third starts only after one of the first two finished
    assert [e.seq_id for e in log.batches[0].entries] == [0, 1]
    assert [e.seq_id for e in log.batches[1].entries] == [0, 1]
    assert [e.seq_id for e in log.batches[2].entries] == [2, 3]
