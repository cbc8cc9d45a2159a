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
    raise NotImplementedError("p3.1: sequential_group_size")


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
        raise NotImplementedError("p3.2: W4A16Linear.forward")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, group_size={self.group_size}"


def load_gptq_weights(model: LlamaForCausalLM, model_path: str | Path) -> None:
    """minivllm's loader for quant_method "gptq": every nn.Linear of the model whose v1 tensors the
    checkpoint holds becomes a W4A16Linear on the model's device; every other tensor (embeddings,
    norms, an untied lm_head) loads into its parameter as minivllm's load_weights does.

    Raises ValueError naming what does not match: a parameter of the model that the checkpoint has
    no tensor for, or a tensor of the checkpoint the model has no place for."""
    raise NotImplementedError("p3.3: load_gptq_weights")


WEIGHT_LOADERS["gptq"] = load_gptq_weights
