"""On the GPU: the P1 engine's decode throughput serving a GPTQ folder against the same engine on
bf16 weights, at Llama-3-8B's layer shapes (8 of its 32 layers, its 128,256-token vocabulary; random
weights), at batch 1 and 16, reported (no bars). Each engine call is one request to the worker whose
reply carries the generated ids, so its GPU work is done when it returns: timed on the judge's own
clock, median of 3, fresh token ids each call (prefix caching off). Not `measure`: its perf audit
refuses library GEMMs, which the bf16 engine (and both lm_heads) run by design."""

import gc
import itertools
import json
import statistics
import time

import pytest
import torch

from autograder.testing import in_worker

pytestmark = pytest.mark.gpu
LLAMA3_8B_LAYERS = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=8,
                        num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=2048,
                        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False, model_type="llama",
                        architectures=["LlamaForCausalLM"], eos_token_id=128001)
LINEARS = {"self_attn.q_proj": (4096, 4096), "self_attn.k_proj": (1024, 4096), "self_attn.v_proj": (1024, 4096),
           "self_attn.o_proj": (4096, 4096), "mlp.gate_proj": (14336, 4096), "mlp.up_proj": (14336, 4096),
           "mlp.down_proj": (4096, 14336)}  # name: (N out, K in)
PROMPT_LEN, OUT_LEN = 64, 64


def write_folders(root):
    """(bf16 folder, GPTQ folder): the same random embeddings, norms and lm_head; the linears random
    bf16 (std 0.02) in one, random 4-bit codes (zero 8, scale 0.003, group 128) in the other."""
    from safetensors.torch import save_file

    gen = torch.Generator("cuda").manual_seed(0)
    cfg = LLAMA3_8B_LAYERS
    rand = lambda *shape: (torch.randn(*shape, generator=gen, device="cuda") * 0.02).bfloat16()
    common = {"model.embed_tokens.weight": rand(cfg["vocab_size"], 4096), "lm_head.weight": rand(cfg["vocab_size"], 4096),
              "model.norm.weight": torch.ones(4096, dtype=torch.bfloat16, device="cuda")}
    fp, q = dict(common), dict(common)
    for i in range(cfg["num_hidden_layers"]):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            fp[f"model.layers.{i}.{norm}.weight"] = q[f"model.layers.{i}.{norm}.weight"] = common["model.norm.weight"]
        for name, (n, k) in LINEARS.items():
            base = f"model.layers.{i}.{name}"
            fp[base + ".weight"] = rand(n, k)
            q[base + ".qweight"] = torch.randint(-2**31, 2**31 - 1, (k // 8, n), generator=gen, device="cuda",
                                                 dtype=torch.int32)
            q[base + ".qzeros"] = torch.full((k // 128, n // 8), 0x77777777, dtype=torch.int32, device="cuda")
            q[base + ".scales"] = torch.full((k // 128, n), 0.003, dtype=torch.float16, device="cuda")
            q[base + ".g_idx"] = (torch.arange(k, device="cuda") // 128).to(torch.int32)
    folders = []
    for name, tensors, extra in (("bf16", fp, {}), ("w4", q, {"quantization_config": {
            "quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True,
            "checkpoint_format": "gptq"}})):
        folder = root / name
        folder.mkdir()
        # one file per layer (and the two tables): the sandbox caps a file at 2 GiB; loaders read every *.safetensors
        shards: dict[str, dict] = {}
        for key, t in tensors.items():
            shard = key.split(".")[2] if key.startswith("model.layers.") else key.split(".")[-2]
            shards.setdefault(shard, {})[key] = t.contiguous().cpu()
        for shard, part in shards.items():
            save_file(part, str(folder / f"model-{shard}.safetensors"))
        (folder / "config.json").write_text(json.dumps(cfg | {"torch_dtype": "bfloat16"} | extra))
        folders.append(str(folder))
    return folders


@in_worker
def engine_runner(folder: str, batch: int):
    """In the worker: an engine on `folder` (CUDA graphs on) and a call that decodes OUT_LEN tokens
    for `batch` fresh prompts of PROMPT_LEN ids (a shift by a prime per call changes every id)."""
    import gptq.engine  # noqa: F401  (registers minivllm's "gptq" loader)
    from minivllm import LLM, SamplingParams

    llm = LLM(folder, device="cuda", dtype="bfloat16", num_kv_blocks=256, max_num_seqs=16,
              max_model_len=512, enable_prefix_caching=False)
    calls = itertools.count(1)
    params = SamplingParams(temperature=0, max_tokens=OUT_LEN, ignore_eos=True)

    def run():  # the generated ids of each prompt, as plain lists
        shift = 7919 * next(calls)
        outs = llm.generate([[(37 * j + 11 * b + shift) % 128000 for j in range(PROMPT_LEN)] for b in range(batch)],
                            params)
        return [list(o.outputs[0].token_ids) for o in outs]

    run()  # warm-up: compiles the kernels
    return run


@in_worker
def release_engine_memory() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def judge_timed(run, batch: int, reps: int = 3) -> float:
    """Median wall seconds of run() on this side's clock; every call must have decoded OUT_LEN ids in
    the vocabulary for each of the `batch` prompts (an engine that stops early is not faster)."""
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        ids = run()
        samples.append(time.perf_counter() - start)
        assert len(ids) == batch and all(len(seq) == OUT_LEN for seq in ids), [len(seq) for seq in ids]
        assert all(0 <= t < LLAMA3_8B_LAYERS["vocab_size"] for seq in ids for t in seq)
    return statistics.median(samples)


@pytest.mark.perf
@pytest.mark.kernels()  # the engine's library GEMMs (bf16 run, lm_head) are the baseline, not the exercise
def test_engine_decode_throughput_w4_vs_bf16(tmp_path, perf):
    bf16, w4 = write_folders(tmp_path)
    ratios = []
    for batch in (1, 16):
        times = {}
        for name, folder in (("bf16", bf16), ("w4", w4)):
            times[name] = judge_timed(engine_runner(folder, batch), batch)
            gc.collect()
            release_engine_memory()
        tokens = batch * OUT_LEN
        ratios.append(times["bf16"] / times["w4"])
        print(f"batch {batch}: bf16 {tokens / times['bf16']:.0f} tok/s, GPTQ w4 {tokens / times['w4']:.0f} tok/s "
              f"({ratios[-1]:.2f}x)")
    perf.record("engine_decode_w4_vs_bf16", (ratios[0] * ratios[1]) ** 0.5)
