"""The whole engine on the tiny LLaMA in fp32 on CPU. Oracle: HF generate(do_sample=False) on each
prompt alone; greedy tokens must be identical. Every run is audited after every step."""

import dataclasses
import json
import shutil

import pytest
import torch
from autograder.testing import in_worker, oracle

from minivllm import LLM, SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)


def serve(path, prompts, params, audit, **config):
    config.setdefault("num_kv_blocks", 128)  # small pool: the audit walks every block at every step
    llm = LLM(path, on_step=audit, device="cpu", dtype="float32", **config)
    outputs = llm.generate(prompts, params)
    audit.assert_all_freed(llm)
    return llm, outputs


@pytest.mark.points(3)
def test_greedy_matches_hf_for_prompts_of_different_lengths(tiny_llama, hf_greedy, make_prompts, block_audit):
    prompts = make_prompts(seed=1, count=8, low=3, high=60)
    _, outputs = serve(tiny_llama[0], prompts, GREEDY, block_audit(), block_size=8)
    assert [o.outputs[0].token_ids for o in outputs] == hf_greedy(prompts, 24)


@pytest.mark.points(3)
def test_greedy_matches_hf_when_the_pool_forces_preemption(tiny_llama, hf_greedy, make_prompts, block_audit):
    prompts = make_prompts(seed=2, count=6, low=5, high=30)
    audit = block_audit()
    # 14 blocks of 4 = 56 token slots for 6 requests of up to 54 tokens each: preemption is certain
    llm, outputs = serve(tiny_llama[0], prompts, GREEDY, audit, block_size=4, num_kv_blocks=14,
                         max_num_batched_tokens=64)
    assert llm.num_preemptions > 0
    assert [o.outputs[0].token_ids for o in outputs] == hf_greedy(prompts, 24)


@pytest.mark.points(3)
def test_greedy_matches_hf_with_chunked_prefill_and_prefix_caching(tiny_llama, hf_greedy, make_prompts,
                                                                    block_audit):
    shared = make_prompts(seed=3, count=1, low=21, high=21)[0]
    tails = make_prompts(seed=4, count=6, low=1, high=12)
    prompts = [shared + t for t in tails]
    audit = block_audit()
    llm = LLM(tiny_llama[0], on_step=audit, device="cpu", dtype="float32", block_size=4, num_kv_blocks=128,
              max_num_batched_tokens=10, max_num_seqs=3, enable_chunked_prefill=True, enable_prefix_caching=True)
    first = llm.generate(prompts[:1], GREEDY)  # computes and caches the shared prefix
    rest = llm.generate(prompts[1:], GREEDY)
    audit.assert_all_freed(llm)
    assert audit.max_step_tokens <= 10 and audit.max_running <= 3
    assert [o.outputs[0].token_ids for o in first + rest] == hf_greedy(prompts, 24)
    assert all(o.num_cached_tokens >= 20 for o in rest)  # 5 full blocks of the 21 shared tokens


@pytest.mark.points(2)
def test_seeded_sampling_is_reproducible_whatever_the_batch(tiny_llama, make_prompts, block_audit):
    prompts = make_prompts(seed=5, count=4, low=4, high=20)
    params = [SamplingParams(temperature=1.0, top_p=0.9, max_tokens=16, seed=100 + i, ignore_eos=True)
              for i in range(4)]
    _, together = serve(tiny_llama[0], prompts, params, block_audit(), block_size=4)
    _, alone = serve(tiny_llama[0], prompts[2:3], params[2:3], block_audit(), block_size=4)
    tokens = [o.outputs[0].token_ids for o in together]
    assert tokens[2] == alone[0].outputs[0].token_ids
    assert len({tuple(t) for t in tokens}) == 4 and all(len(t) == 16 for t in tokens)


@pytest.mark.points(2)
def test_outputs_are_vllm_shaped_and_in_prompt_order(tiny_llama, hf_greedy, make_prompts, block_audit):
    prompts = make_prompts(seed=6, count=3, low=2, high=40)
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (5, 1, 12)]
    _, outputs = serve(tiny_llama[0], prompts, params, block_audit(), block_size=8)
    assert len(outputs) == 3 and len({o.request_id for o in outputs}) == 3
    for out, prompt, n, expected in zip(outputs, prompts, (5, 1, 12), hf_greedy(prompts, 12)):
        assert out.prompt_token_ids == prompt and out.finished
        assert out.outputs[0].token_ids == expected[:n] and out.outputs[0].finish_reason == "length"
        assert out.metrics.first_token_time >= out.metrics.arrival_time


@pytest.mark.points(2)
def test_the_models_eos_token_stops_a_request(tiny_llama, hf_greedy, make_prompts, block_audit, tmp_path):
    prompt = make_prompts(seed=7, count=1, low=10, high=10)[0]
    expected = hf_greedy([prompt], 24)[0]
    eos = expected[5]  # make the 6th greedy token the model's EOS
    shutil.copytree(tiny_llama[0], tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "eos_token_id": eos}))
    _, outputs = serve(tmp_path / "m", [prompt, prompt],
                       [SamplingParams(temperature=0, max_tokens=24),
                        SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)], block_audit())
    stop = expected.index(eos) + 1
    assert outputs[0].outputs[0].token_ids == expected[:stop] and outputs[0].outputs[0].finish_reason == "stop"
    assert outputs[1].outputs[0].token_ids == expected and outputs[1].outputs[0].finish_reason == "length"


@in_worker
def step_with_a_block_copy(llm) -> tuple[torch.Tensor, torch.Tensor]:
    """In the worker: one `llm.step()` whose batch also asks for a copy, as the scheduler asks on a
    copy-on-write: src = the second block of the first running sequence (full, computed), dst = the
    highest block id no running sequence holds (a decode of a sequence with a slot to spare takes
    no block, so the copy harms nobody). Returns the pool's block src before the step and its block
    dst after it (each (layers, 2, block_size, kv_heads, head_dim))."""
    src = llm.scheduler.running[0].block_table[1]
    held = {b for seq in llm.scheduler.running for b in seq.block_table}
    dst = max(set(range(llm.block_manager.num_blocks)) - held)
    schedule = llm.scheduler.schedule

    def schedule_with_a_copy():
        return dataclasses.replace(schedule(), block_copies=((src, dst),))

    before = llm.model_runner.kv_cache[:, :, src].clone()
    llm.scheduler.schedule = schedule_with_a_copy
    try:
        llm.step()
    finally:
        del llm.scheduler.schedule
    return before, llm.model_runner.kv_cache[:, :, dst].clone()


@pytest.mark.points(1)
def test_step_copies_the_blocks_the_batch_asks_for(tiny_llama, hf_greedy, make_prompts):
    prompt = make_prompts(seed=8, count=1, low=9, high=9)[0]
    llm = LLM(tiny_llama[0], device="cpu", dtype="float32", block_size=4, num_kv_blocks=16)
    llm.add_request(prompt, GREEDY)
    llm.step()  # the prefill fills blocks 0 and 1 of the sequence's table; its 10th token fits block 2
    before, after = step_with_a_block_copy(llm)
    assert before.abs().sum() > 0, "the prefill wrote nothing to the sequence's second block"
    assert torch.equal(after, before), "the block the batch asked to copy was not copied before the step"
    outputs = []
    while llm.has_unfinished_requests():
        outputs += llm.step()
    assert outputs[0].outputs[0].token_ids == hf_greedy([prompt], 24)[0]


@pytest.fixture(scope="module")
def course_llama():
    """The course's trained model and tokenizer, when this checkout has them (else: not graded)."""
    coursedata = pytest.importorskip("coursedata")
    path = coursedata.model_path("course-llama")
    if not (path / "model.safetensors").is_file() or not (path / "tokenizer.json").is_file():
        pytest.skip("the course model is not built in this checkout")
    return path, coursedata.load_model("course-llama"), coursedata.load_tokenizer()


@pytest.mark.points(2)
def test_course_model_answers_text_prompts_like_hf(course_llama, block_audit):
    path, hf, tok = course_llama
    texts = ["The old man looked out at the sea and", "It was the best of times,",
             "Call me Ishmael. Some years ago, never mind how long precisely,"]
    audit = block_audit()
    # tied embeddings, 5 layers, GQA 6/2, EOS = 0 honoured; chunked prefill and prefix caching on
    llm = LLM(path, on_step=audit, device="cpu", dtype="float32", block_size=8, num_kv_blocks=64,
              max_num_batched_tokens=16)
    outputs = llm.generate(texts, SamplingParams(temperature=0, max_tokens=20))
    audit.assert_all_freed(llm)
    for text, out in zip(texts, outputs):
        ids = tok(text, return_tensors="pt").input_ids
        with torch.no_grad(), oracle():
            ref = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, do_sample=False)
        expected = ref[0, ids.shape[1]:].tolist()
        assert out.prompt_token_ids == ids[0].tolist()
        assert out.outputs[0].token_ids == expected
        assert out.outputs[0].text == tok.decode(expected, skip_special_tokens=True)
