"""gptq.engine: the W4A16 layer against the dequantized weight, and the P1 engine serving a GPTQ
folder of the course model (RTN codes packed by the test's own oracle), each greedy token checked
against transformers' LLaMA on the dequantized weights, teacher-forced: the token must be the
oracle's argmax up to GAP logits (bf16 engine vs fp32 oracle; measured gap 0.0 over 16 tokens)."""

import pytest
import torch
from gptq.engine import W4A16Linear, sequential_group_size

from autograder.testing import in_worker

KEYS = ("qweight", "qzeros", "scales", "g_idx")
GAP = 0.05


@pytest.mark.kernels()  # no kernel: reads g_idx
@pytest.mark.parametrize("case", ["g128", "partial-last-group", "one-group", "act-order", "uneven"])
def test_sequential_group_size_finds_the_fast_path(case):
    g_idx, expected = {
        "g128": (torch.arange(256) // 128, 128),
        "partial-last-group": (torch.arange(320) // 128, 128),
        "one-group": (torch.zeros(64, dtype=torch.int64), 64),
        "act-order": ((torch.arange(256) // 32)[torch.randperm(256, generator=torch.Generator().manual_seed(0))], 0),
        "uneven": (torch.tensor([0, 0, 1, 1, 1, 1, 1, 1]), 0),  # groups of 2 and 6: no single size
    }[case]
    assert sequential_group_size(g_idx.to(torch.int32)) == expected


@pytest.mark.parametrize("act", [False, True], ids=["sequential", "act-order"])
def test_w4a16_linear_matches_the_dequantized_weight(oracles, tol, device, act):
    t, w = oracles.random_v1(256, 72, 64, act, seed=50)
    layer = W4A16Linear(*(t[key].to(device) for key in KEYS), group_size=0 if act else 64)
    x = torch.randn(2, 3, 256, generator=torch.Generator().manual_seed(51)).bfloat16()
    y = layer(x.to(device)).cpu()
    assert y.shape == (2, 3, 72) and y.dtype == torch.bfloat16
    ref = x.float() @ w.T
    floor = float(((x.float() @ w.bfloat16().float().T).bfloat16().float() - ref).abs().mean() / ref.abs().mean())
    err = float((y.float() - ref).abs().mean() / ref.abs().mean())
    assert err < floor + tol("w4a16, bf16")["rtol"], f"rel error {err:.2e}, bound {floor:.2e} + 1e-3"


@in_worker
def serve(folder: str, prompts: list[list[int]], max_tokens: int, device: str) -> dict:
    """In the worker: minivllm serving the GPTQ folder in bf16 (on CPU: the kernel in Triton's
    interpreter); greedy tokens per prompt and the classes the engine's linears ended up as."""
    import gptq.engine  # noqa: F401  (registers minivllm's "gptq" loader)
    from minivllm import LLM, SamplingParams

    llm = LLM(folder, dtype="bfloat16", device=device, max_num_seqs=4, max_model_len=128, num_kv_blocks=32)
    model = llm.model_runner.model
    layer = model.model.layers[-1]
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True))
    return {"tokens": [list(o.outputs[0].token_ids) for o in outs],
            "linears": [type(m).__name__ for m in (layer.self_attn.q_proj, layer.self_attn.o_proj,
                                                   layer.mlp.gate_proj, layer.mlp.down_proj)],
            "lm_head": type(model.lm_head).__name__}


@pytest.mark.kernels()  # the engine's attention and norms are torch: the layer's own test grades the kernel
@pytest.mark.points(2)
def test_engine_serves_the_gptq_folder_greedy_as_the_dequantized_model(course_model, oracles, tmp_path, device):
    deq = oracles.gptq_llama(tmp_path / "w4", course_model.folder)
    prompt = course_model.ids[1000:1012].tolist()
    got = serve(str(tmp_path / "w4"), [prompt], 4, device)
    assert got["linears"] == ["W4A16Linear"] * 4 and got["lm_head"] == "Linear"
    tokens = got["tokens"][0]
    assert len(tokens) == 4
    weights = {name.removesuffix(".weight"): w for name, w in deq.items()}
    logits = course_model.forward(course_model.sd, torch.tensor(prompt + tokens), weights)
    gaps = oracles.greedy_gaps(logits, len(prompt), tokens)
    assert max(gaps) <= GAP, f"tokens {tokens}: logit gaps to the oracle's argmax {gaps}"
