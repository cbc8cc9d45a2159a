"""Hidden engine tests on the tiny LLaMA (fp32, CPU): cache sharing between live sequences,
preemption with sampling, odd budgets, limits. Oracle: HF greedy; seeded runs without pressure."""

import pytest

from minivllm import LLM, SamplingParams


def llm_for(tiny_llama, audit, **config):
    config.setdefault("num_kv_blocks", 128)
    return LLM(tiny_llama[0], on_step=audit, device="cpu", dtype="float32", **config)


def greedy(n, **kw):
    return SamplingParams(temperature=0, max_tokens=n, ignore_eos=True, **kw)


def tokens_of(outputs):
    return [o.outputs[0].token_ids for o in outputs]


@pytest.mark.points(3)
def test_a_partial_block_is_never_shared_by_running_sequences(tiny_llama, hf_greedy, make_prompts, block_audit):
    prompt = make_prompts(seed=20, count=1, low=10, high=10)[0]  # 2 full blocks of 4 and a partial one
    audit = block_audit()
    # budget 10: the first copy prefills alone, the second arrives while the first decodes
    llm = llm_for(tiny_llama, audit, block_size=4, max_num_batched_tokens=10)
    sampled = SamplingParams(temperature=1.0, max_tokens=16, seed=3, ignore_eos=True)
    out = llm.generate([prompt, prompt], [greedy(16), sampled])
    alone = llm_for(tiny_llama, block_audit(), block_size=4, enable_prefix_caching=False).generate([prompt], sampled)
    assert out[1].num_cached_tokens == 8
    assert tokens_of(out)[0] == hf_greedy([prompt], 16)[0]
    assert tokens_of(out)[1] == tokens_of(alone)[0]
    audit.assert_all_freed(llm)


@pytest.mark.points(2)
def test_a_repeated_prompt_of_whole_blocks_matches_hf(tiny_llama, hf_greedy, make_prompts, block_audit):
    prompt = make_prompts(seed=21, count=1, low=12, high=12)[0]
    audit = block_audit()
    llm = llm_for(tiny_llama, audit, block_size=4)
    first = llm.generate([prompt], greedy(10))
    second = llm.generate([prompt], greedy(10))
    assert second[0].num_cached_tokens == 8  # the last block holds the last token: recomputed
    assert tokens_of(first) == tokens_of(second) == hf_greedy([prompt], 10)
    audit.assert_all_freed(llm)


@pytest.mark.points(3)
def test_preempted_sequences_keep_their_generated_tokens(tiny_llama, make_prompts, block_audit):
    prompts = make_prompts(seed=22, count=5, low=6, high=20)
    params = [SamplingParams(temperature=0.8, top_k=50, max_tokens=20, seed=40 + i, ignore_eos=True)
              for i in range(5)]
    audit = block_audit()  # also asserts that no sequence's generated tokens ever shrink
    tight = llm_for(tiny_llama, audit, block_size=4, num_kv_blocks=10, max_num_batched_tokens=32)
    pressed = tight.generate(prompts, params)
    relaxed = llm_for(tiny_llama, block_audit(), block_size=4).generate(prompts, params)
    assert tight.num_preemptions > 0
    assert tokens_of(pressed) == tokens_of(relaxed)
    audit.assert_all_freed(tight)


@pytest.mark.points(2)
def test_chunked_prefill_with_a_budget_below_one_block(tiny_llama, hf_greedy, make_prompts, block_audit):
    prompts = make_prompts(seed=23, count=4, low=5, high=30)
    audit = block_audit()
    llm = llm_for(tiny_llama, audit, block_size=8, max_num_batched_tokens=3)
    assert tokens_of(llm.generate(prompts, greedy(8))) == hf_greedy(prompts, 8)
    assert audit.max_step_tokens <= 3


@pytest.mark.points(2)
def test_every_step_respects_the_budget_and_max_num_seqs(tiny_llama, hf_greedy, make_prompts, block_audit):
    prompts = make_prompts(seed=24, count=7, low=3, high=25)
    audit = block_audit()
    llm = llm_for(tiny_llama, audit, block_size=4, max_num_seqs=3, max_num_batched_tokens=32,
                  enable_chunked_prefill=False, max_model_len=32)
    outputs = llm.generate(prompts, greedy(6))
    assert audit.max_running <= 3 and audit.max_step_tokens <= 32
    assert tokens_of(outputs) == hf_greedy(prompts, 6)


@pytest.mark.points(2)
def test_blocks_of_generated_tokens_serve_a_follow_up_prompt(tiny_llama, hf_greedy, make_prompts, block_audit):
    prompt = make_prompts(seed=25, count=1, low=7, high=7)[0]
    audit = block_audit()
    llm = llm_for(tiny_llama, audit, block_size=4)
    first = llm.generate([prompt], greedy(13))[0]
    follow = prompt + first.outputs[0].token_ids + [17, 18]  # 22 tokens, 5 full blocks
    second = llm.generate([follow], greedy(6))[0]
    assert second.num_cached_tokens == 16  # blocks 0..3: the last computed token of `first` is 19
    assert second.outputs[0].token_ids == hf_greedy([follow], 6)[0]


@pytest.mark.points(2)
def test_evicted_cache_blocks_under_pressure_still_give_hf_tokens(tiny_llama, hf_greedy, make_prompts,
                                                                 block_audit):
    stem = make_prompts(seed=26, count=1, low=9, high=9)[0]
    prompts = [stem + t for t in make_prompts(seed=27, count=8, low=1, high=9)]
    audit = block_audit()
    llm = llm_for(tiny_llama, audit, block_size=4, num_kv_blocks=12, max_num_batched_tokens=16)
    assert tokens_of(llm.generate(prompts, greedy(12))) == hf_greedy(prompts, 12)
    assert llm.num_preemptions > 0
    audit.assert_all_freed(llm)


@pytest.mark.points(1)
def test_stop_tokens_max_model_len_and_one_token_prompts(tiny_llama, hf_greedy, make_prompts, block_audit):
    p1, p2 = make_prompts(seed=28, count=2, low=30, high=30)
    expected = hf_greedy([p1, p2, [5]], 12)
    llm = llm_for(tiny_llama, block_audit(), block_size=4, max_model_len=40)
    out = llm.generate([p1, p2, [5]], [greedy(20, stop_token_ids=[expected[0][3]]), greedy(20), greedy(1)])
    stop = expected[0].index(expected[0][3]) + 1
    assert out[0].outputs[0].token_ids == expected[0][:stop] and out[0].outputs[0].finish_reason == "stop"
    assert out[1].outputs[0].token_ids == expected[1][:10] and out[1].outputs[0].finish_reason == "length"
    assert out[2].outputs[0].token_ids == expected[2][:1]


@pytest.mark.points(1)
def test_step_by_step_api_reports_each_request_once(tiny_llama, make_prompts, block_audit):
    llm = llm_for(tiny_llama, block_audit(), block_size=4, debug_check_invariants=True)
    ids = [llm.add_request(p, greedy(n)) for p, n in zip(make_prompts(seed=29, count=3, low=2, high=9), (3, 1, 5))]
    finished = []
    while llm.has_unfinished_requests():
        finished += llm.step()
    assert sorted(int(o.request_id) for o in finished) == sorted(ids)
    for o in finished:
        m = o.metrics
        assert m.arrival_time <= m.first_scheduled_time <= m.first_token_time <= m.finished_time
