"""On the GPU: the paper's speedup, and chunked prefill's claim.

Speculative decoding: measured speedup over the target decoding alone (stage 1's `generate`, the
same KV-cached loop) within 20% of (1 - a^(g+1)) / ((1 - a)(g c + 1)), with a measured on the same
runs and c = (draft time per token) / (target time per token), each model decoding alone. On the
course pair (a from transformers' models in the judge) and on a random-weight pair of real sizes
(Llama-3-8B's shapes as the target, Llama-3.2-1B's as the draft; a from the package's
measure_acceptance, which the CPU tier checks against transformers). Every timed call is one
request to the worker whose reply carries the generated ids, so its GPU work is done when it
returns: timed on the judge's clock, median of 5.

Chunked prefill: the long_prompt trace (24 requests, arrivals twice as fast) served by the P1
engine on Llama-3-8B's shapes with 8 of its layers (random weights), prefill-first with whole
prompts vs decode-first with 512-token chunks: the inter-token latency p99 (computed here from the
token times) must fall with chunks, and the stalls must vanish (graded wherever there is a GPU);
the ratio of the p99s is a perf metric with bars from the reference's H200 run.
"""

import functools
import gc
import os
import statistics
import time

import pytest
import torch
from conftest import betas_oracle, pair_dirs, prompt

from autograder.testing import in_worker

pytestmark = pytest.mark.gpu

LLAMA3_8B = {"vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 8,
                 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 16384,
                 "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": False}
LLAMA32_1B = dict(LLAMA3_8B, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_key_value_heads=8,
                  head_dim=64, tie_word_embeddings=True)


@functools.cache
def _models(kind: str):
    from transformer import Llama, LlamaConfig, load_model

    if kind == "course":
        target, draft = pair_dirs()
        return (load_model(target, dtype=torch.bfloat16, device="cuda"),
                load_model(draft, dtype=torch.bfloat16, device="cuda"))
    out = []
    for seed, shape in ((0, LLAMA3_8B | {"num_hidden_layers": 32}), (1, LLAMA32_1B)):
        torch.manual_seed(seed)
        with torch.device("cuda"):
            model = Llama(LlamaConfig(**shape)).to(torch.bfloat16).eval()
        for p in model.parameters():
            if p.ndim == 2:
                p.data.normal_(0, 0.02)
        out.append(model)
    return tuple(out)


@in_worker
def decode_alone(kind: str, which: int, prompt_ids: list[int], n: int) -> list[int]:
    from transformer import SamplingParams, generate

    model = _models(kind)[which]
    gen = torch.Generator("cuda").manual_seed(0)
    ids = torch.tensor([prompt_ids], device="cuda")
    out = generate(model, ids, max_new_tokens=n, sampling=SamplingParams(temperature=1.0), generator=gen)
    return out[0, len(prompt_ids):].tolist()


@in_worker
def spec(kind: str, prompt_ids: list[int], n: int, gamma: int, seed: int) -> dict:
    from specdec import measure_acceptance, speculative_generate
    from transformer import SamplingParams

    t, d = _models(kind)
    params = SamplingParams(temperature=1.0)
    o = speculative_generate(t, d, prompt_ids, max_new_tokens=n, gamma=gamma, params=params,
                             generator=torch.Generator("cuda").manual_seed(seed))
    out = {"tokens": list(o.tokens), "rounds": list(o.round_tokens)}
    if kind != "course":
        out["betas"] = measure_acceptance(t, d, prompt_ids + list(o.tokens), len(prompt_ids), params).cpu().tolist()
    return out


def timed(fn, *args, repeats: int = 5):
    fn(*args)  # warm-up (and the models' first load)
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def check_speedup(tol, kind: str, gamma: int, n: int = 256) -> None:
    prompt_ids = prompt(32, part=7)
    t_target, _ = timed(decode_alone, kind, 0, prompt_ids, n)
    t_draft, _ = timed(decode_alone, kind, 1, prompt_ids, n)
    t_spec, run = timed(spec, kind, prompt_ids, n, gamma, 0)
    c = t_draft / t_target
    if kind == "course":
        betas = betas_oracle(prompt_ids + run["tokens"], len(prompt_ids), 1.0, 1.0).tolist()
    else:
        betas = run["betas"]
    alpha = sum(betas) / len(betas)
    predicted = (1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * c + 1))
    measured = t_target / t_spec
    note = (f"{kind}, gamma {gamma}: alpha {alpha:.3f}, c {c:.3f}, tokens/call {sum(run['rounds']) / len(run['rounds']):.2f}; "
            f"speedup {measured:.2f}x measured, {predicted:.2f}x predicted")
    print(note)
    assert abs(measured - predicted) <= tol("speedup vs the paper")["rtol"] * predicted, note


@pytest.mark.points(3)
@pytest.mark.parametrize("gamma", [2])
def test_course_pair_speedup_follows_the_paper(tol, gamma):
    check_speedup(tol, "course", gamma)


@pytest.mark.points(3)
def test_real_size_pair_speedup_follows_the_paper(tol):
    check_speedup(tol, "llama3-8b", 2)


@in_worker
def serve_trace(folder: str, requests: list, policy: str) -> dict:
    from minivllm import LLM
    from specdec import TraceRequest, plot_timeline, replay

    chunked = policy == "decode_first"
    # A pool that holds every request of the trace at once (its blocks, one spare each), whatever
    # else this worker's earlier tests left on the card: sized from the trace, not from a memory
    # fraction (0.5 of an 80 GB H100 beside an earlier 8B pair left room for no block at all).
    blocks = sum(-(-(len(p) + m) // 16) + 1 for _, p, m in requests)
    gc.collect()
    torch.cuda.empty_cache()
    llm = LLM(folder, dtype="bfloat16", device="cuda", max_model_len=8448, max_num_seqs=64,
              max_num_batched_tokens=512 if chunked else 8448, enable_chunked_prefill=chunked,
              scheduling_policy=policy, enable_prefix_caching=False, block_size=16, num_kv_blocks=blocks)
    replay(llm, [TraceRequest(0.0, tuple(requests[0][1][:64]), 4)])  # warm-up: kernels, graphs
    result = replay(llm, [TraceRequest(a, tuple(p), m) for a, p, m in requests])
    # The handout's timelines. The grader passes no such variable to its worker: set it in a direct
    # call of this function (AUTOGRADER_ROLE=worker, outside the grader), as the figures were made.
    if os.environ.get("P7_FIGURES"):
        plot_timeline(result, os.path.join(os.environ["P7_FIGURES"], f"timeline_{policy}.png"),
                      f"{policy}: prefill (orange), decode (blue), stalled decodes (red)")
    del llm
    torch.cuda.empty_cache()
    return {"times": [list(t) for t in result.token_times],
            "stalled": sum(s.stalled for s in result.steps), "steps": len(result.steps)}


def write_random_folder(root) -> str:
    import json

    from safetensors.torch import save_file

    gen = torch.Generator("cuda").manual_seed(0)
    cfg = LLAMA3_8B
    rand = lambda *shape: (torch.randn(*shape, generator=gen, device="cuda") * 0.02).bfloat16()
    h, kv = cfg["hidden_size"], cfg["num_key_value_heads"] * cfg["head_dim"]
    shapes = {"self_attn.q_proj": (h, h), "self_attn.k_proj": (kv, h), "self_attn.v_proj": (kv, h),
              "self_attn.o_proj": (h, h), "mlp.gate_proj": (cfg["intermediate_size"], h),
              "mlp.up_proj": (cfg["intermediate_size"], h), "mlp.down_proj": (h, cfg["intermediate_size"])}
    ones = torch.ones(h, dtype=torch.bfloat16, device="cuda")
    save_file({"model.embed_tokens.weight": rand(cfg["vocab_size"], h).cpu(), "lm_head.weight": rand(cfg["vocab_size"], h).cpu(),
               "model.norm.weight": ones.cpu()}, str(root / "model-tables.safetensors"))
    for i in range(cfg["num_hidden_layers"]):
        layer = {f"model.layers.{i}.{n}.weight": ones.cpu() for n in ("input_layernorm", "post_attention_layernorm")}
        layer |= {f"model.layers.{i}.{name}.weight": rand(*shape).cpu() for name, shape in shapes.items()}
        save_file(layer, str(root / f"model-{i:02d}.safetensors"))
    config = dict(cfg, model_type="llama", architectures=["LlamaForCausalLM"], eos_token_id=128001)
    (root / "config.json").write_text(json.dumps(config))
    return str(root)


def tpot_p99_and_throughput(times: list[list[float]]) -> tuple[float, float]:
    import numpy as np

    tpots = [(t[-1] - t[0]) / (len(t) - 1) for t in times if len(t) > 1]
    return float(np.percentile(tpots, 99)), sum(len(t) for t in times) / max(t[-1] for t in times)


def itl_p99(times: list[list[float]]) -> float:
    import numpy as np

    gaps = np.concatenate([np.diff(t) for t in times if len(t) > 1])
    return float(np.percentile(gaps, 99))


@functools.cache
def trace_runs(root: str) -> tuple[dict, dict]:
    """(prefill-first run, chunked run) of the trace, served once for both tests below."""
    import pathlib

    import coursedata

    folder = write_random_folder(pathlib.Path(root))
    trace = coursedata.load_trace("long_prompt")
    gen = torch.Generator().manual_seed(0)
    requests = [(r.arrival_s / 2, torch.randint(0, 128000, (r.prompt_len,), generator=gen).tolist(), r.output_len)
                for r in trace.requests[:24]]
    first = serve_trace(folder, requests, "prefill_first")
    chunked = serve_trace(folder, requests, "decode_first")
    for run in (first, chunked):
        assert [len(t) for t in run["times"]] == [m for _, _, m in requests]
    return first, chunked


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    return trace_runs(str(tmp_path_factory.mktemp("llama3-8b-8layers")))


@pytest.mark.points(3)
def test_chunked_prefill_stops_decode_stalls(served):
    first, chunked = served
    ratio = itl_p99(first["times"]) / itl_p99(chunked["times"])
    print(f"ITL p99 {itl_p99(first['times']) * 1e3:.1f} ms prefill-first, {itl_p99(chunked['times']) * 1e3:.1f} ms "
          f"chunked ({ratio:.2f}x); stalled decode-steps {first['stalled']} vs {chunked['stalled']}; "
          "TPOT p99 %.1f vs %.1f ms, throughput %.0f vs %.0f tok/s" % (
              *(1e3 * tpot_p99_and_throughput(r["times"])[0] for r in (first, chunked)),
              *(tpot_p99_and_throughput(r["times"])[1] for r in (first, chunked))))
    assert chunked["stalled"] == 0 < first["stalled"]
    assert ratio > 1.0, f"chunked prefill must cut the p99 inter-token latency, got {ratio:.2f}x"


@pytest.mark.perf
def test_chunked_prefill_itl_ratio(served, perf):
    first, chunked = served
    perf.record("chunked_itl_p99_ratio", itl_p99(first["times"]) / itl_p99(chunked["times"]))
