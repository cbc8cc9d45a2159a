"""Scheduler: admission, the token budget, chunked prefill, preemption, finishing (no model involved;
the test plays the model by handing back a token for each sequence that reaches its end)."""

import pytest

from minivllm import BlockManager, EngineConfig, SamplingParams, Scheduler, Sequence, SequenceStatus

BS = 4


def make(num_blocks=64, max_tokens=8, caching=False, max_model_len=128, **cfg):
    config = EngineConfig(block_size=BS, num_kv_blocks=num_blocks, enable_prefix_caching=caching, **cfg)
    sched = Scheduler(config, BlockManager(num_blocks, BS, caching), max_model_len, eos_token_ids=(2,))
    return sched


def add(sched, seq_id, n_tokens, max_tokens=8, **params):
    seq = Sequence(seq_id, [10 + (seq_id * 7 + i) % 50 for i in range(n_tokens)],
                   SamplingParams(max_tokens=max_tokens, **params), BS)
    sched.add(seq)
    return seq


def fake_step(sched, token=7):
    """One engine step with a model that always answers `token`; returns ([(seq_id, n)], finished)."""
    scheduled = sched.schedule()
    tokens = [token if s.seq.num_computed_tokens + s.num_tokens == s.seq.num_tokens else None for s in scheduled]
    plan = [(s.seq.seq_id, s.num_tokens) for s in scheduled]
    finished = sched.postprocess(scheduled, tokens)
    return plan, finished


@pytest.mark.points(1)
def test_admits_first_come_first_served_up_to_max_num_seqs():
    sched = make(max_num_seqs=2, max_num_batched_tokens=100)
    a, b, c = add(sched, 0, 5), add(sched, 1, 6), add(sched, 2, 7)
    plan, _ = fake_step(sched)
    assert plan == [(0, 5), (1, 6)]
    assert [s.seq_id for s in sched.running] == [0, 1] and list(sched.waiting) == [c]
    assert a.status == b.status == SequenceStatus.RUNNING and c.status == SequenceStatus.WAITING


@pytest.mark.points(2)
def test_chunked_prefill_splits_a_long_prompt_under_the_token_budget():
    sched = make(max_num_batched_tokens=8, enable_chunked_prefill=True)
    a = add(sched, 0, 20)
    plans = [fake_step(sched)[0] for _ in range(4)]
    assert plans == [[(0, 8)], [(0, 8)], [(0, 4)], [(0, 1)]]
    assert a.num_completion_tokens == 2  # one token after the last chunk, one after the decode
    assert a.num_computed_tokens == 21


@pytest.mark.points(1)
def test_without_chunked_prefill_a_prompt_waits_for_room_in_the_budget():
    sched = make(max_num_batched_tokens=16, enable_chunked_prefill=False)
    add(sched, 0, 10)
    add(sched, 1, 10)
    assert fake_step(sched)[0] == [(0, 10)]
    assert fake_step(sched)[0] == [(0, 1), (1, 10)]


@pytest.mark.points(1)
def test_running_sequences_are_scheduled_before_new_prompts():
    sched = make(max_num_batched_tokens=12, enable_chunked_prefill=True)
    add(sched, 0, 6)
    fake_step(sched)
    add(sched, 1, 30)
    plan, _ = fake_step(sched)
    assert plan == [(0, 1), (1, 11)]  # the decode first, then what is left of the budget


@pytest.mark.points(2)
def test_preemption_evicts_the_newest_sequence_and_keeps_its_tokens(pool_problems):
    sched = make(num_blocks=4, max_num_batched_tokens=64, max_tokens=20)
    a = add(sched, 0, 8, max_tokens=20)  # 2 blocks
    b = add(sched, 1, 7, max_tokens=20)  # 2 blocks: the pool is full
    fake_step(sched)  # prefill both; a and b each got one token
    plan, _ = fake_step(sched)  # b reaches 8 tokens with room; a needs a 3rd block: b is evicted
    assert plan == [(0, 1)]
    assert sched.running == [a] and list(sched.waiting) == [b]
    assert b.status == SequenceStatus.WAITING and b.block_table == [] and b.num_computed_tokens == 0
    assert b.token_ids[7:] == [7], "a preempted sequence keeps its generated token"
    assert not pool_problems(sched.block_manager, sched.running, sched.waiting)
    assert sched.num_preemptions == 1


@pytest.mark.points(1)
def test_finished_sequences_leave_and_free_their_blocks():
    sched = make(num_blocks=8, max_num_batched_tokens=64)
    a = add(sched, 0, 5, max_tokens=2)
    b = add(sched, 1, 5, max_tokens=5)
    fake_step(sched)
    _, finished = fake_step(sched)
    assert finished == [a] and a.status == SequenceStatus.FINISHED and a.finish_reason == "length"
    assert a.completion_token_ids == [7, 7] and a.block_table == []
    assert sched.running == [b] and sched.block_manager.num_free_blocks == 8 - len(b.block_table)


@pytest.mark.points(1)
def test_eos_finishes_unless_ignored():
    sched = make(num_blocks=8, max_num_batched_tokens=64)
    a = add(sched, 0, 3)
    b = add(sched, 1, 3, ignore_eos=True)
    _, finished = fake_step(sched, token=2)  # 2 is the EOS id given to the scheduler
    assert finished == [a] and a.finish_reason == "stop" and a.completion_token_ids == [2]
    assert b.status == SequenceStatus.RUNNING
