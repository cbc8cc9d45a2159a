"""gptq.engine, more: an act-order folder (the kernel's g_idx path) loaded layer by layer equal to
its dequantized weights, and a folder missing a linear refused (served greedy: the serving file)."""

import pytest
import torch

from autograder.testing import in_worker

pytestmark = pytest.mark.kernels()  # the engine's torch parts run beside the kernel


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
def test_act_order_folder_loads_layers_equal_to_the_dequantized_weights(course_model, oracles, tmp_path, device):
    """Act-order groups mix the columns of a tile: each loaded layer against its dequantized weight."""
    deq = oracles.gptq_llama(tmp_path / "act", course_model.folder, act_order=True)
    x = torch.randn(5, 384, generator=torch.Generator().manual_seed(60)).bfloat16()
    for name in ("model.layers.1.self_attn.q_proj", "model.layers.1.mlp.gate_proj"):
        ref = x.float() @ deq[name + ".weight"].T
        floor = float(((x.float() @ deq[name + ".weight"].bfloat16().float().T).bfloat16().float() - ref).abs().mean()
                      / ref.abs().mean())
        err = float((layer_output(str(tmp_path / "act"), name, x, device).float() - ref).abs().mean() / ref.abs().mean())
        assert err < floor + 1e-3, f"{name}: rel error {err:.2e}, bound {floor:.2e} + 1e-3"


def test_a_folder_missing_a_linear_is_refused_by_name(course_model, oracles, tmp_path):
    oracles.gptq_llama(tmp_path / "holey", course_model.folder, drop=("model.layers.2.mlp.up_proj",))
    message = load_error(str(tmp_path / "holey"))
    assert "model.layers.2.mlp.up_proj" in message, f"ValueError message: {message!r}"
