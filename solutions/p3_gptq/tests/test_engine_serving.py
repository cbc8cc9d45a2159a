"""The P1 engine serving a GPTQ folder of the course model (RTN codes packed by the test's own
oracle), each greedy token checked against transformers' LLaMA on the dequantized weights,
teacher-forced: the token must be the oracle's argmax up to GAP logits (bf16 engine vs fp32
oracle; measured gap 0.0 over 16 tokens). On CPU the kernel runs in Triton's interpreter: a few
tokens take tens of seconds."""

import pytest
import torch

from autograder.testing import in_worker

GAP = 0.05


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
