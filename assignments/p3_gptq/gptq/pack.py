"""The GPTQ v1 checkpoint layout (AutoGPTQ's and vLLM's "gptq" format), 4-bit.

    qweight int32 (K/8, N)  codes of input rows 8j..8j+7 of column n in word j; row 8j+t in bits 4t..4t+3
    qzeros  int32 (G, N/8)  zero - 1 of columns 8c..8c+7 of group g in word c, the same way
    scales  fp16  (G, N)
    g_idx   int32 (K,)      the group of each input row (not sorted under act-order)
    W[n, k] = scales[g, n] * (code[k, n] - (stored_zero[g, n] + 1)),  g = g_idx[k]
v1 stores zero - 1, so a zero of 0 cannot be stored (it would need -1); checkpoint_format "gptq_v2"
stores the zero itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from .quantizer import QuantConfig, QuantResult

SHIFTS = torch.arange(0, 32, 4, dtype=torch.int64)  # (8,): nibble t sits at bits 4t..4t+3
V1_KEYS = ("qweight", "qzeros", "scales", "g_idx")


def pack_int4(codes: Tensor) -> Tensor:
    """Codes (R, C) with values in [0, 16), R % 8 == 0 -> int32 (R/8, C): row 8j+t of column c in
    bits 4t..4t+3 of word (j, c), least significant nibble first (bit 31 is the sign bit)."""
    if codes.dim() != 2 or codes.shape[0] % 8:
        raise ValueError(f"codes must be 2-D with rows a multiple of 8, got shape {tuple(codes.shape)}")
    if codes.numel() and (codes.min() < 0 or codes.max() > 15):
        raise ValueError("4-bit codes must lie in [0, 16)")
    raise NotImplementedError("p3.13: pack_int4")


def unpack_int4(packed: Tensor) -> Tensor:
    """Inverse of pack_int4: int32 (R/8, C) -> int32 codes (R, C)."""
    raise NotImplementedError("p3.14: unpack_int4")


def pack_v1(result: QuantResult) -> dict[str, Tensor]:
    """A 4-bit QuantResult -> the v1 tensors {qweight, qzeros, scales (fp16), g_idx}.

    Raises ValueError for a zero outside [1, 16]: v1 stores zero - 1 in 4 bits."""
    raise NotImplementedError("p3.15: pack_v1")


def dequantize_v1(tensors: dict[str, Tensor]) -> Tensor:
    """The v1 tensors -> W (N, K) float32."""
    raise NotImplementedError("p3.16: dequantize_v1")


def quantization_config(config: QuantConfig) -> dict:
    """config.json's quantization_config for a 4-bit v1 checkpoint."""
    if config.bits != 4:
        raise ValueError(f"the checkpoint format here is 4-bit, got bits={config.bits}")
    raise NotImplementedError("p3.17: quantization_config")


def save_checkpoint(folder: str | Path, layers: dict[str, dict[str, Tensor]], config: QuantConfig,
                    model_config: dict | None = None) -> Path:
    """Write folder/model.safetensors ("<layer>.qweight", ... for each layer's v1 tensors) and
    folder/config.json (model_config plus quantization_config). Returns the folder."""
    from safetensors.torch import save_file

    folder = Path(folder)
    raise NotImplementedError("p3.18: save_checkpoint")


def load_checkpoint(folder: str | Path) -> tuple[dict[str, dict[str, Tensor]], dict]:
    """Read a checkpoint written by save_checkpoint: ({layer: v1 tensors}, the whole config.json).

    Raises ValueError unless quantization_config says quant_method "gptq", bits 4 and format "gptq"."""
    from safetensors.torch import load_file

    folder = Path(folder)
    raise NotImplementedError("p3.19: load_checkpoint")
