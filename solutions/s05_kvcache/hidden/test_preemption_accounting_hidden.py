"""A step that preempts admits nothing; the prefix-cache statistics count every admission whole.

Hand-worked workload (decode_first, pool of 6 blocks of 2 tokens, budget 16): A and B both hold
the prompt [1, 2, 3, 4, 5] and arrive together, so both get fresh blocks (the second copy of each
full block is a duplicate that is not registered). Free queue in brackets.
  step 0  A -> [0, 1, 2], B -> [3, 4, 5]; both prefill 5 tokens and sample (100, 110).     [ ]
  step 1  both decode position 5 into their third block.                                   [ ]
  step 2  A needs a fourth block: B is preempted, its table freed tail first [5, 4, 3];
          A takes 5 (evicting B's cached [5, 110]).                                    [4, 3]
          B = [1..5, 110, 111] would fit now: its first two blocks hit A's blocks 0 and 1,
          still in use (free of charge), and 2 fresh blocks cover the rest. But a step that
          preempted admits nothing: B waits.
  step 3  A decodes; B is re-admitted: table [0, 1, 4, 3], recomputes positions 4..6.
Prefix-cache stats: three allocations (A, B, B again) of 5 + 5 + 7 tokens, 4 of them hits.
"""

from __future__ import annotations

import random

import pytest

from conftest import drive, make_scheduler
from kvcache import Sequence


def entries(batch):
    return [(e.seq_id, e.start_pos, e.num_tokens, e.slot_mapping) for e in batch.entries]


def twin_scheduler():
    sched = make_scheduler(num_blocks=6, block_size=2, max_num_seqs=2, max_num_batched_tokens=16,
                           max_model_len=10, policy="decode_first", enable_chunked_prefill=True)
    return sched, Sequence(0, [1, 2, 3, 4, 5], 4), Sequence(1, [1, 2, 3, 4, 5], 4)


@pytest.mark.points(3)
def test_a_step_that_preempts_admits_nothing_even_when_the_victim_would_fit():
    sched, a, b = twin_scheduler()
    sched.add(a)
    sched.add(b)
    s0 = sched.schedule()
    assert entries(s0) == [(0, 0, 5, (0, 1, 2, 3, 4)), (1, 0, 5, (6, 7, 8, 9, 10))]
    sched.update(s0, {0: 100, 1: 110})
    s1 = sched.schedule()
    assert entries(s1) == [(0, 5, 1, (5,)), (1, 5, 1, (11,))]
    sched.update(s1, {0: 101, 1: 111})
    s2 = sched.schedule()
    assert s2.preempted == (1,)
    assert entries(s2) == [(0, 6, 1, (10,))], "a step that preempted must not admit (the victim included)"
    assert list(sched.waiting) == [b] and b.block_table == []
    sched.update(s2, {0: 102})
    s3 = sched.schedule()
    assert s3.preempted == ()
    assert entries(s3) == [(0, 7, 1, (11,)), (1, 4, 3, (8, 9, 6))]
    assert b.block_table == [0, 1, 4, 3] and b.num_cached_tokens == 4


@pytest.mark.points(2)
def test_hit_rate_counts_each_admission_with_all_its_tokens():
    """A re-admitted sequence is looked up with its generated tokens: 5 + 5 + 7 query tokens."""
    sched, a, b = twin_scheduler()
    log = drive(sched, [a, b], [0, 0])
    assert [bt.preempted for bt in log.batches if bt.preempted] == [(1,)]
    stats = sched.block_manager.stats
    assert (stats.num_queries, stats.query_tokens, stats.hit_tokens) == (3, 17, 4)
    assert stats.hit_rate == pytest.approx(4 / 17, rel=1e-12)


# ---- random workloads under pressure: many copies of few prompts, so re-admitted victims often
# hit blocks their twins still hold and would fit in the very step that preempted them ----------
def twin_workload(seed: int):
    rng = random.Random(seed)
    bases = [[rng.randrange(1, 1000) for _ in range(9)] for _ in range(2)]
    prompts = []
    for _ in range(8):
        base = rng.choice(bases)
        prompts.append(base[: rng.randint(5, 9)] if rng.random() < 0.4 else list(base))
    max_tokens = [rng.randint(3, 16 - len(p)) for p in prompts]
    arrivals = sorted(rng.choice([0, 0, 1, 4]) for _ in prompts)
    return prompts, max_tokens, arrivals


def pressure_scheduler():
    return make_scheduler(num_blocks=9, block_size=2, max_num_seqs=4, max_num_batched_tokens=12,
                          max_model_len=16, policy="decode_first", enable_chunked_prefill=True)


class AdmissionLog:
    """drive() hook: checks that no step both preempts and admits, and counts, per admission, the
    sequence's tokens at that moment (prompt + tokens sampled so far) and its first computed
    position (the tokens served from the prefix cache)."""

    def __init__(self, prompt_lens: list[int]) -> None:
        self.prompt_lens = prompt_lens
        self.sampled = [0] * len(prompt_lens)
        self.admissions = 0
        self.query_tokens = 0
        self.hit_tokens = 0
        self.preempting_steps = 0

    def __call__(self, batch, before) -> None:
        # an entry of a sequence that was not running, or that this very step preempted, is an admission
        admitted = [e for e in batch.entries if e.seq_id not in before or e.seq_id in batch.preempted]
        if batch.preempted:
            self.preempting_steps += 1
            assert not admitted, (f"step {batch.step} preempted {batch.preempted} and admitted "
                                  f"{[e.seq_id for e in admitted]}")
            assert not set(batch.preempted) & {e.seq_id for e in batch.entries}
        for e in admitted:
            self.admissions += 1
            self.query_tokens += self.prompt_lens[e.seq_id] + self.sampled[e.seq_id]
            self.hit_tokens += e.start_pos
        for e in batch.entries:
            self.sampled[e.seq_id] += e.samples


@pytest.mark.points(3)
@pytest.mark.parametrize("seed", range(5))
def test_no_step_both_preempts_and_admits_and_hit_rate_is_exact_under_pressure(seed):
    prompts, max_tokens, arrivals = twin_workload(seed)
    seqs = [Sequence(i, p, n) for i, (p, n) in enumerate(zip(prompts, max_tokens))]
    hook = AdmissionLog([len(p) for p in prompts])
    sched = pressure_scheduler()
    drive(sched, seqs, arrivals, hook=hook)
    assert hook.preempting_steps > 0, "this workload is built to force preemption"
    stats = sched.block_manager.stats
    assert (stats.num_queries, stats.query_tokens, stats.hit_tokens) == (
        hook.admissions, hook.query_tokens, hook.hit_tokens)
    assert stats.hit_rate == pytest.approx(hook.hit_tokens / hook.query_tokens, rel=1e-12)
