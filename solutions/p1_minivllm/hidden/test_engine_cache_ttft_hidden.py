"""Hidden engine tests on the tiny LLaMA (fp32, CPU): a duplicate block's reuse must not evict the
live copy from the prefix cache; time to first token is stamped when the first token exists.
Oracle: HF greedy tokens; cache hits and step indices worked by hand."""

import sys
from types import SimpleNamespace

import pytest
from autograder.testing import in_worker

from minivllm import LLM, SamplingParams


def greedy(n):
    return SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)


@pytest.mark.points(2)
def test_reusing_a_duplicate_block_keeps_the_live_copy_cached(tiny_llama, hf_greedy, make_prompts, block_audit):
    """Pool of 8 blocks of 4 tokens; P has 12 tokens (3 full blocks), D 13 other tokens.
      step 0  A = P and B = P are admitted together: fresh blocks A [0, 1, 2], B [3, 4, 5]. Both
              prefill; A's blocks are registered, B's are duplicates of the same hashes (not the
              registered ones). B (1 token) finishes: free list [6, 7, 5, 4, 3].
      step 1  A takes 6 for its 13th token; D takes 7, 5, 4, 3 (B's duplicates) and finishes.
              Reusing a duplicate must leave the cache entry of A's live block alone.
      step 2  C = P arrives: it must hit A's blocks 0 and 1 (8 tokens; the block holding C's
              last token is recomputed), and every output must still be HF's.
    """
    p = make_prompts(seed=40, count=1, low=12, high=12)[0]
    d = make_prompts(seed=43, count=1, low=13, high=13)[0]
    assert d[:4] != p[:4]
    audit = block_audit()
    llm = LLM(tiny_llama[0], on_step=audit, device="cpu", dtype="float32", block_size=4, num_kv_blocks=8,
              max_num_batched_tokens=64)
    done = {}
    ids = {"A": llm.add_request(p, greedy(6)), "B": llm.add_request(p, greedy(1))}
    for name, prompt, n in (("D", d, 1), ("C", p, 3)):  # D arrives after step 0, C after step 1
        for out in llm.step():
            done[int(out.request_id)] = out
        ids[name] = llm.add_request(prompt, greedy(n))
    while llm.has_unfinished_requests():
        for out in llm.step():
            done[int(out.request_id)] = out
    out = {name: done[i] for name, i in ids.items()}
    assert out["B"].outputs[0].finish_reason == "length" and audit.steps >= 3
    assert out["C"].num_cached_tokens == 8, (
        f"C found {out['C'].num_cached_tokens} cached tokens: the reuse of a duplicate block dropped "
        "the cache entry of the block A still holds")
    want_p, want_d = hf_greedy([p, d], 6)
    got = {name: o.outputs[0].token_ids for name, o in out.items()}
    assert got == {"A": want_p, "B": want_p[:1], "D": want_d[:1], "C": want_p[:3]}
    audit.assert_all_freed(llm)


@in_worker
def generate_on_a_step_clock(model_path, prompts, max_tokens, counting=False, **config):
    """In the worker: LLM.generate with the engine module's clock replaced by one that reads the
    number of finished steps plus 10 (the on_step hook, run last in each step, advances it), or with
    `counting`, the number of clock reads so far plus 10 (every reading is later than the one before).
    Returns the (seq_id, num_tokens) of every step's batch entries, the tokens and the metrics of each
    request."""
    engine = sys.modules[LLM.__module__]
    steps, plan, reads = [0], [], [0]

    def now() -> float:
        reads[0] += 1
        return 10.0 + (reads[0] if counting else steps[0])

    def hook(llm, batch) -> None:
        plan.append([[e.seq_id, e.num_tokens] for e in batch.entries])
        steps[0] += 1

    def now_ns() -> int:
        return int(now() * 1e9)

    clock = SimpleNamespace(perf_counter=now, monotonic=now, time=now, perf_counter_ns=now_ns,
                            monotonic_ns=now_ns, time_ns=now_ns)
    real = engine.time
    engine.time = clock
    try:
        llm = LLM(model_path, on_step=hook, device="cpu", dtype="float32", **config)
        outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True))
    finally:
        engine.time = real
    metrics = [[o.metrics.arrival_time, o.metrics.first_scheduled_time, o.metrics.first_token_time,
                o.metrics.finished_time] for o in outs]
    return {"plan": plan, "tokens": [o.outputs[0].token_ids for o in outs], "metrics": metrics}


@pytest.mark.points(2)
def test_ttft_is_stamped_after_the_last_prefill_chunk(tiny_llama, hf_greedy, make_prompts):
    """Budget 8 tokens a step; S has 3 prompt tokens, L has 20, both arrive at clock 0.
      step 0: S 3 (samples), L 5    step 1: S 1, L 7    step 2: S 1, L 7    step 3: S 1 (done), L 1
    L's first token comes out of step 3, the last of its chunks; S's out of step 0.
    The clock reads 10 + the number of finished steps: a stamp made during step k reads 10 + k."""
    short = make_prompts(seed=41, count=1, low=3, high=3)[0]
    long = make_prompts(seed=42, count=1, low=20, high=20)[0]
    run = generate_on_a_step_clock(str(tiny_llama[0]), [short, long], 4, block_size=4, num_kv_blocks=32,
                                   max_num_batched_tokens=8)
    assert run["plan"][:4] == [[[0, 3], [1, 5]], [[0, 1], [1, 7]], [[0, 1], [1, 7]], [[0, 1], [1, 1]]]
    assert run["tokens"] == hf_greedy([short, long], 4)
    (s_arrival, s_sched, s_first, s_done), (l_arrival, l_sched, l_first, l_done) = run["metrics"]
    assert s_arrival == l_arrival == 10.0 and s_sched == l_sched == 10.0
    assert (s_first - s_arrival, s_done - s_arrival) == (0.0, 3.0)
    assert l_first - l_arrival == 3.0, (
        f"L's first token is stamped in step {l_first - 10:g}: TTFT must end with its last prefill chunk")
    assert l_done - l_arrival == 6.0


@pytest.mark.points(1)
def test_first_token_and_finish_are_stamped_after_the_model_ran(tiny_llama, make_prompts):
    """On a clock that moves at every reading, a stamp taken when the step began (before the model
    ran) is earlier than one taken after it: first_token_time and finished_time must be the one
    reading after the step's work (handout: "then, at one time.perf_counter() reading"), so both are
    later than first_scheduled_time, and equal to each other for a one-token request."""
    prompt = make_prompts(seed=43, count=1, low=5, high=5)[0]
    run = generate_on_a_step_clock(str(tiny_llama[0]), [prompt], 1, counting=True, block_size=4, num_kv_blocks=16)
    arrival, scheduled, first, done = run["metrics"][0]
    assert arrival < scheduled < first == done, (
        f"clock readings: arrival {arrival:g}, first scheduled {scheduled:g}, first token {first:g}, "
        f"finished {done:g}: the first token and the finish must be stamped at one reading taken after "
        "the model ran, later than the step's start")
