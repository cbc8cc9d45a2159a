"""Prompts longer than the token budget: chunk sizes, decode stalls, and the non-chunked path."""

from __future__ import annotations

import pytest

from conftest import make_scheduler
from kvcache import Sequence


def run_by_hand(sched, seqs):
    """Step until done, sampling token 500 + step; returns [(seq_id, start, n), ...] per step."""
    for seq in seqs:
        sched.add(seq)
    steps = []
    while sched.has_unfinished():
        batch = sched.schedule()
        assert batch.num_tokens <= sched.config.max_num_batched_tokens
        steps.append([(e.seq_id, e.start_pos, e.num_tokens) for e in batch.entries])
        sched.update(batch, {e.seq_id: 500 + len(steps) for e in batch.entries if e.samples})
        assert len(steps) < 100
    return steps


def short_and_long():
    return Sequence(0, [1, 2, 3], 5), Sequence(1, list(range(100, 130)), 2)  # 30-token prompt


def config(policy, chunked=True, budget=8):
    return dict(num_blocks=16, block_size=4, max_num_seqs=4, max_num_batched_tokens=budget,
                max_model_len=32, policy=policy, enable_chunked_prefill=chunked)


@pytest.mark.points(3)
def test_decode_first_chunks_a_long_prompt_around_running_decodes():
    steps = run_by_hand(make_scheduler(**config("decode_first")), short_and_long())
    assert steps == [
        [(0, 0, 3), (1, 0, 5)],  # A's prompt, then B's first chunk fills the budget of 8
        [(0, 3, 1), (1, 5, 7)],  # A decodes every step; B gets what is left
        [(0, 4, 1), (1, 12, 7)],
        [(0, 5, 1), (1, 19, 7)],
        [(0, 6, 1), (1, 26, 4)],  # B's last chunk samples its first token; A is done
        [(1, 30, 1)],
    ]


@pytest.mark.points(3)
def test_prefill_first_stalls_decodes_while_a_long_prompt_is_chunked():
    steps = run_by_hand(make_scheduler(**config("prefill_first")), short_and_long())
    assert steps == [
        [(0, 0, 3), (1, 0, 5)],
        [(1, 5, 8)],  # A waits: a step with prefill work holds nothing else
        [(1, 13, 8)],
        [(1, 21, 8)],
        [(1, 29, 1)],
        [(0, 3, 1), (1, 30, 1)],
        [(0, 4, 1)],
        [(0, 5, 1)],
        [(0, 6, 1)],
    ]


@pytest.mark.points(2)
def test_without_chunking_a_long_prompt_runs_whole_in_its_own_step():
    steps = run_by_hand(make_scheduler(**config("prefill_first", chunked=False, budget=32)), short_and_long())
    assert steps[0] == [(0, 0, 3)]  # 30 tokens do not fit the 29 left
    assert steps[1] == [(1, 0, 30)]
    assert steps[2] == [(0, 3, 1), (1, 30, 1)]


@pytest.mark.points(1)
def test_prompt_longer_than_max_model_len_is_refused():
    sched = make_scheduler(**config("decode_first"))
    with pytest.raises(ValueError):
        sched.add(Sequence(0, list(range(32)), 1))
    sched.add(Sequence(1, list(range(31)), 1))  # exactly max_model_len in all
    assert sched.has_unfinished()


@pytest.mark.points(2)
def test_identical_block_aligned_prompt_recomputes_only_its_last_block():
    sched = make_scheduler(**config("decode_first"))
    first = Sequence(0, list(range(16)), 1)  # 4 full blocks
    assert run_by_hand(sched, [first]) == [[(0, 0, 8)], [(0, 8, 8)]]
    second = Sequence(1, list(range(16)), 1)
    steps = run_by_hand(sched, [second])
    assert steps == [[(1, 12, 4)]]  # 3 blocks hit, the 4th recomputed so the prompt has logits
    assert second.num_cached_tokens == 12
