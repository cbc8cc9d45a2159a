"""gptq.engine, more: an act-order folder (the kernel's g_idx path) served greedy as the dequantized
model, greedy agreement with the FP engine reported, and a folder missing a linear refused."""

import pytest
import torch

from autograder.testing import in_worker

GAP = 0.05  # logits; see tests/test_engine.py

pytestmark = pytest.mark.kernels()  # the engine's torch parts run beside the kernel


@in_worker
def serve(folder: str, prompts: list[list[int]], max_tokens: int, device: str) -> list[list[int]]:
    """In the worker: greedy tokens of minivllm in bf16 serving `folder` (GPTQ or FP)."""
    import gptq.engine  # noqa: F401  (registers minivllm's "gptq" loader)
    from minivllm import LLM, SamplingParams

    llm = LLM(folder, dtype="bfloat16", device=device, max_num_seqs=4, max_model_len=128, num_kv_blocks=32)
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True))
    return [list(o.outputs[0].token_ids) for o in outs]


@in_worker
def layer_output(folder: str, name: str, x: torch.Tensor, device: str) -> torch.Tensor:
    """In the worker: the output on x of the module `name` of the engine built on `folder`."""
    import gptq.engine  # noqa: F401
    from minivllm import LLM

    llm = LLM(folder, dtype="bfloat16", device=device, max_num_seqs=2, max_model_len=64, num_kv_blocks=16)
    return llm.model_runner.model.get_submodule(name)(x.to(device)).cpu()


@in_worker
def load_error(folder: str) -> str:
    """In the worker: the ValueError minivllm raises building an engine on `folder` ("" if none)."""
    import gptq.engine  # noqa: F401
    from minivllm import LLM

    try:
        LLM(folder, dtype="bfloat16", device="cpu", max_num_seqs=2, max_model_len=64)
    except ValueError as e:
        return str(e)
    return ""


@pytest.mark.points(2)
def test_act_order_folder_is_served_as_the_dequantized_model(course_model, oracles, tmp_path, device):
    deq = oracles.gptq_llama(tmp_path / "act", course_model.folder, act_order=True)
    prompt = course_model.ids[5000:5010].tolist()
    tokens = serve(str(tmp_path / "act"), [prompt], 4, device)[0]
    weights = {name.removesuffix(".weight"): w for name, w in deq.items()}
    gaps = oracles.greedy_gaps(course_model.forward(course_model.sd, torch.tensor(prompt + tokens), weights),
                               len(prompt), tokens)
    assert len(tokens) == 4 and max(gaps) <= GAP, f"tokens {tokens}: logit gaps {gaps}"
    # Every linear of a layer against its dequantized weight: act-order groups mix the columns of a tile.
    x = torch.randn(5, 384, generator=torch.Generator().manual_seed(60)).bfloat16()
    for name in ("model.layers.1.self_attn.q_proj", "model.layers.1.mlp.gate_proj"):
        ref = x.float() @ deq[name + ".weight"].T
        floor = float(((x.float() @ deq[name + ".weight"].bfloat16().float().T).bfloat16().float() - ref).abs().mean()
                      / ref.abs().mean())
        err = float((layer_output(str(tmp_path / "act"), name, x, device).float() - ref).abs().mean() / ref.abs().mean())
        assert err < floor + 1e-3, f"{name}: rel error {err:.2e}, bound {floor:.2e} + 1e-3"
    fp = serve(str(course_model.folder), [prompt], 4, device)[0]
    print(f"greedy agreement with the FP engine (bf16): {sum(a == b for a, b in zip(tokens, fp))}/4 tokens")


def test_a_folder_missing_a_linear_is_refused_by_name(course_model, oracles, tmp_path):
    oracles.gptq_llama(tmp_path / "holey", course_model.folder, drop=("model.layers.2.mlp.up_proj",))
    message = load_error(str(tmp_path / "holey"))
    assert "model.layers.2.mlp.up_proj" in message, f"ValueError message: {message!r}"
