"""GPU perf tier on a ~250M-parameter random LLaMA in bf16 (hidden 1024, 16 layers, GQA 16/8,
vocab 32000): throughput against HF generate over static padded batches of the same requests timed
in the same run, and the bandwidth a pure decode step reaches against the device's copy bandwidth.

The engine runs in the worker process, the HF baseline here. Both engine figures are timed by
`measure` in the worker, bracketed by this side's clock, with the op accounting paused and then
audited (one more profiled call): the profiler costs a host-bound engine a large share of its
step time, which HF, timed inside `oracle()`, would not pay. The workload first runs once with
the accounting on, for its outputs; the timed call then generates the same lengths from fresh
token ids, so that no run hits the prefix cache of the one before. What a decode step reads is
counted in the worker (`decode_bytes`). The throughput test attaches bench.py's figure (bench_plot.py)
to its result: both throughputs, and the TTFT / TPOT distributions of the accounted run."""

import gc
import itertools
import time

import pytest
import torch
from autograder.testing import in_worker, oracle

from autograder.timing import Work, copy_bandwidth, measure
from bench_plot import BenchRun, figure, latencies
from minivllm import LLM, SamplingParams

BIG = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=16,
           num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=4096, initializer_range=0.02)
# nano-vllm's workload shape (uniform random lengths, random ids, seed 0), scaled so that the HF
# baseline finishes in about a minute: 128 requests, prompts in [64, 512], outputs in [32, 256].
NUM_REQUESTS, PROMPT_LENS, OUTPUT_LENS, HF_BATCH = 128, (64, 512), (32, 256), 32
WORKLOAD = (f"~250M random LLaMA, bf16; {NUM_REQUESTS} requests, prompts of {PROMPT_LENS[0]}-{PROMPT_LENS[1]} "
            f"and outputs of {OUTPUT_LENS[0]}-{OUTPUT_LENS[1]} tokens")


@pytest.fixture(scope="module")
def big_llama(tmp_path_factory, llama_builder):
    path = tmp_path_factory.mktemp("big_llama")
    return path, llama_builder(path, seed=0, dtype=torch.bfloat16, device="cuda", **BIG)


def workload(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ins = torch.randint(PROMPT_LENS[0], PROMPT_LENS[1] + 1, (NUM_REQUESTS,), generator=g).tolist()
    outs = torch.randint(OUTPUT_LENS[0], OUTPUT_LENS[1] + 1, (NUM_REQUESTS,), generator=g).tolist()
    prompts = [torch.randint(0, BIG["vocab_size"], (n,), generator=g).tolist() for n in ins]
    return prompts, outs


def hf_static(model, prompts, out_lens, batch_size):
    """HF generate over left-padded batches in arrival order; each batch runs to its longest output."""
    for i in range(0, len(prompts), batch_size):
        batch = prompts[i:i + batch_size]
        width = max(map(len, batch))
        ids = torch.tensor([[0] * (width - len(p)) + p for p in batch], device="cuda")
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch], device="cuda")
        with torch.no_grad(), oracle():
            model.generate(ids, attention_mask=mask, max_new_tokens=max(out_lens[i:i + batch_size]),
                           do_sample=False, pad_token_id=0)


@in_worker
def release_engine_memory() -> None:
    """In the worker: collect the engines the judge dropped and give their blocks back to the device."""
    gc.collect()
    torch.cuda.empty_cache()


@in_worker
def prefill_all(llm) -> None:
    """In the worker: step until every request is prefilled; from then on a step is a pure decode."""
    sched = llm.scheduler
    while sched.waiting or any(s.num_computed_tokens < s.num_tokens - 1 for s in sched.running):
        llm.step()


@in_worker
def running_state(llm) -> tuple[int, int, int]:
    """In the worker: (running sequences, their tokens in all, preemptions so far)."""
    sched = llm.scheduler
    return len(sched.running), sum(s.num_tokens for s in sched.running), llm.num_preemptions


@in_worker
def decode_bytes(llm) -> tuple[int, int, int]:
    """In the worker: (weight bytes, bytes of the embedding table, KV bytes per token) of an engine."""
    runner = llm.model_runner
    embed = runner.model.model.embed_tokens.weight
    return runner.weight_bytes, embed.numel() * embed.element_size(), runner.kv_bytes_per_token


@in_worker
def workload_runner(llm, prompts, out_lens):
    """In the worker: a call without arguments that runs the whole workload through `generate`,
    each call on fresh token ids with the same lengths (the same work, no prefix-cache hits on the
    call before: a shift by a prime modulo the vocabulary changes every id)."""
    calls = itertools.count(1)

    def run():
        shift = 7919 * next(calls)
        fresh = [[(t + shift) % BIG["vocab_size"] for t in p] for p in prompts]
        return llm.generate(fresh, [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in out_lens])

    return run


def timed(fn):
    """Wall seconds of fn() on this side's clock, and its result. For the HF baseline (here) the
    synchronizes fence its kernels; for the engine fn is one request to the worker whose reply
    carries host values, so its GPU work is finished when it returns."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start, result


@pytest.mark.gpu
@pytest.mark.perf
@pytest.mark.points(4)
@pytest.mark.kernels("minivllm.paged_decode_triton", "minivllm.fused_triton")
def test_throughput_vs_hf_static_batches(big_llama, perf):
    path, hf = big_llama
    prompts, out_lens = workload()
    hf_static(hf, prompts[:2], [4, 4], 2)  # warm-up
    hf_s, _ = timed(lambda: hf_static(hf, prompts, out_lens, HF_BATCH))
    torch.cuda.empty_cache()  # HF's cached blocks, here in the judge: the engine sizes its pool from what is free

    llm = LLM(path, device="cuda", dtype="bfloat16")
    llm.generate(prompts[:4], SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))  # warm-up
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in out_lens]
    accounted_s, outputs = timed(lambda: llm.generate(prompts, params))  # accounted: kernels it must run, none it may not
    assert [len(o.outputs[0].token_ids) for o in outputs] == out_lens
    # one timed run (its mean is its time), on ids no earlier call saw: the runner shifts every id
    ours_s = measure(workload_runner(llm, prompts, out_lens), warmup=0, reps=1, flush_l2=False).graded_s

    useful = sum(out_lens)
    ttft_s, tpot_s = latencies(outputs)
    ttft, tpot = sum(ttft_s) / len(ttft_s), sum(tpot_s) / len(tpot_s)
    print(f"minivllm {useful / ours_s:.0f} tok/s ({ours_s:.2f} s; {accounted_s:.2f} s with the accounting on), "
          f"mean TTFT {ttft * 1e3:.0f} ms, mean TPOT {tpot * 1e3:.1f} ms (accounted run), "
          f"preemptions {llm.num_preemptions}; "
          f"HF static batch {HF_BATCH}: {useful / hf_s:.0f} tok/s ({hf_s:.2f} s)")
    perf.record("throughput_vs_hf_static", hf_s / ours_s)
    perf.attach("throughput_latency", figure(BenchRun(
        hardware=torch.cuda.get_device_name(), settings=WORKLOAD + "; latencies of the run with the accounting on",
        engine_tok_s=useful / ours_s, ttft_s=ttft_s, tpot_s=tpot_s, hf_tok_s=useful / hf_s,
        hf_label=f"HF generate (static batches of {HF_BATCH})")))
    del llm, outputs
    gc.collect()  # the proxies: the worker drops the engine with the next request
    release_engine_memory()  # give the pool back before the next test sizes its own


@pytest.mark.gpu
@pytest.mark.perf
@pytest.mark.points(3)
@pytest.mark.kernels("minivllm.paged_decode_triton", "minivllm.fused_triton")
def test_decode_step_bandwidth_fraction(big_llama, perf, make_prompts):
    path, _ = big_llama
    batch, context = 64, 1024
    llm = LLM(path, device="cuda", dtype="bfloat16", max_num_seqs=batch)
    for p in make_prompts(seed=40, count=batch, low=context, high=context, vocab=BIG["vocab_size"]):
        llm.add_request(p, SamplingParams(temperature=0, max_tokens=256, ignore_eos=True))
    prefill_all(llm)  # from here on every step is a pure decode of `batch` rows
    running, contexts_before, _ = running_state(llm)
    assert running == batch

    weight_bytes, embed_bytes, kv_bytes_per_token = decode_bytes(llm)
    weights = weight_bytes - embed_bytes  # a decode reads `batch` rows only
    # llm.step is a method of the worker's engine: measure times it there, bracketed by this clock.
    # No input sets to rotate: each step decodes new tokens on longer contexts, never the same input
    # twice. The least a step reads (weights, the KV of the contexts before) bounds it by the copy.
    t = measure(llm.step, warmup=3, reps=30, flush_l2=False,  # the step reads ~0.5 GB: L2 is moot
                work=Work(bytes=weights + contexts_before * kv_bytes_per_token))
    running, contexts_after, preemptions = running_state(llm)
    assert preemptions == 0 and running == batch

    kv = (contexts_before + contexts_after) / 2 * kv_bytes_per_token
    step_bw = (weights + kv) / t.graded_s

    copy_bw = copy_bandwidth(2 ** 30, device="cuda")
    print(f"decode step {t.graded_s * 1e3:.2f} ms for {batch} rows: {step_bw / 1e12:.2f} TB/s "
          f"(weights {weights / 1e9:.2f} GB, KV {kv / 1e9:.2f} GB); copy {copy_bw / 1e12:.2f} TB/s")
    perf.record("decode_bw_fraction", step_bw / copy_bw)
