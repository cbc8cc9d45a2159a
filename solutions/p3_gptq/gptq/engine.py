"""Serving a GPTQ checkpoint with the P1 engine: a W4A16 linear layer and minivllm's loader for it.

Importing this module registers `load_gptq_weights` in minivllm's WEIGHT_LOADERS under "gptq", so
`minivllm.LLM(folder)` serves a folder whose config.json says quant_method "gptq" (as vLLM picks a
quantized linear from the checkpoint's quantization_config):

    import gptq.engine  # noqa: F401  (registers the loader)
    llm = minivllm.LLM("course-llama-w4g128", dtype="bfloat16")

The folder holds the v1 tensors of every decoder linear ("model.layers.0.self_attn.q_proj.qweight",
... as save_checkpoint writes them) and the weights GPTQ does not touch (embeddings, norms, lm_head)
under their usual names.
"""

from __future__ import annotations

from pathlib import Path

import torch
from minivllm.model import WEIGHT_LOADERS, LlamaForCausalLM
from safetensors.torch import load_file
from torch import Tensor, nn

from .pack import V1_KEYS
from .w4a16 import w4a16_matmul


def sequential_group_size(g_idx: Tensor) -> int:
    """The group size g if g_idx == arange(K) // g with every group but the last full (the kernel's
    fast path), else 0 (act-order: the kernel reads g_idx for every input row).

    A single group covering all of K gives K."""
    # BEGIN SOLUTION
    g_idx = g_idx.to(torch.int64).cpu()
    size = int((g_idx == 0).sum())  # the only candidate: the first group's size
    if size == 0:
        return 0
    return size if torch.equal(g_idx, torch.arange(g_idx.numel()) // size) else 0
    # END SOLUTION


class W4A16Linear(nn.Module):
    """y = x @ W^T for W (out_features, in_features) held as GPTQ v1 tensors, computed by w4a16_matmul.

    The v1 tensors are buffers (they move with .to(device), count in the engine's weight bytes, and
    no optimizer sees them). group_size: sequential_group_size(g_idx), found once when loading, so
    the forward never syncs with the device (it runs inside CUDA graphs); 0 for act-order."""

    def __init__(self, qweight: Tensor, qzeros: Tensor, scales: Tensor, g_idx: Tensor, group_size: int) -> None:
        super().__init__()
        if qweight.dim() != 2 or g_idx.shape != (qweight.shape[0] * 8,):
            raise ValueError(f"qweight (K/8, N) and g_idx (K,) disagree: {tuple(qweight.shape)} and {tuple(g_idx.shape)}")
        self.in_features, self.out_features = qweight.shape[0] * 8, qweight.shape[1]
        self.register_buffer("qweight", qweight.contiguous())
        self.register_buffer("qzeros", qzeros.contiguous())
        self.register_buffer("scales", scales.contiguous())
        self.register_buffer("g_idx", g_idx.to(torch.int32).contiguous())
        self.group_size = group_size

    def forward(self, x: Tensor) -> Tensor:
        """x (..., in_features) fp16/bf16 -> (..., out_features) in x's dtype."""
        # BEGIN SOLUTION
        flat = x.reshape(-1, self.in_features)
        out = w4a16_matmul(flat, self.qweight, self.qzeros, self.scales, self.g_idx, group_size=self.group_size)
        return out.view(*x.shape[:-1], self.out_features)
        # END SOLUTION

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, group_size={self.group_size}"


def load_gptq_weights(model: LlamaForCausalLM, model_path: str | Path) -> None:
    """minivllm's loader for quant_method "gptq": every nn.Linear of the model whose v1 tensors the
    checkpoint holds becomes a W4A16Linear on the model's device; every other tensor (embeddings,
    norms, an untied lm_head) loads into its parameter as minivllm's load_weights does.

    Raises ValueError naming what does not match: a parameter of the model that the checkpoint has
    no tensor for, or a tensor of the checkpoint the model has no place for."""
    # BEGIN SOLUTION
    state: dict[str, Tensor] = {}
    for f in sorted(Path(model_path).glob("*.safetensors")):
        state.update(load_file(str(f)))
    if not state:
        raise ValueError(f"no .safetensors file in {model_path}")
    device = next(model.parameters()).device
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.Linear) and f"{name}.qweight" in state:
            tensors = [state.pop(f"{name}.{key}") for key in V1_KEYS]
            layer = W4A16Linear(*(t.to(device) for t in tensors), group_size=sequential_group_size(tensors[-1]))
            parent, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent), attr, layer)
    if "lm_head.weight" not in state and model.config.tie_word_embeddings and "model.embed_tokens.weight" in state:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith(V1_KEYS)]  # the buffers just built
    if missing or unexpected:
        raise ValueError(f"GPTQ checkpoint {model_path} does not match the model: missing {missing}, "
                         f"unexpected {unexpected}")
    # END SOLUTION


WEIGHT_LOADERS["gptq"] = load_gptq_weights
