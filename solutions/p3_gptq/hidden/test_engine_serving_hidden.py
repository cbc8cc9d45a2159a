"""The P1 engine serving an act-order GPTQ folder (the kernel's g_idx path) greedy as the
dequantized model, and its greedy agreement with the FP engine reported. Slow on CPU (the kernel in
Triton's interpreter)."""

import pytest
import torch

from autograder.testing import in_worker

GAP = 0.05  # logits; see tests/test_engine_serving.py

pytestmark = pytest.mark.kernels()  # the engine's torch parts run beside the kernel


@in_worker
def serve(folder: str, prompts: list[list[int]], max_tokens: int, device: str) -> list[list[int]]:
    """In the worker: greedy tokens of minivllm in bf16 serving `folder` (GPTQ or FP)."""
    import gptq.engine  # noqa: F401  (registers minivllm's "gptq" loader)
    from minivllm import LLM, SamplingParams

    llm = LLM(folder, dtype="bfloat16", device=device, max_num_seqs=4, max_model_len=128, num_kv_blocks=32)
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True))
    return [list(o.outputs[0].token_ids) for o in outs]


@pytest.mark.points(2)
def test_act_order_folder_is_served_as_the_dequantized_model(course_model, oracles, tmp_path, device):
    deq = oracles.gptq_llama(tmp_path / "act", course_model.folder, act_order=True)
    prompt = course_model.ids[5000:5010].tolist()
    tokens = serve(str(tmp_path / "act"), [prompt], 4, device)[0]
    weights = {name.removesuffix(".weight"): w for name, w in deq.items()}
    gaps = oracles.greedy_gaps(course_model.forward(course_model.sd, torch.tensor(prompt + tokens), weights),
                               len(prompt), tokens)
    assert len(tokens) == 4 and max(gaps) <= GAP, f"tokens {tokens}: logit gaps {gaps}"
    fp = serve(str(course_model.folder), [prompt], 4, device)[0]
    print(f"greedy agreement with the FP engine (bf16): {sum(a == b for a, b in zip(tokens, fp))}/4 tokens")
