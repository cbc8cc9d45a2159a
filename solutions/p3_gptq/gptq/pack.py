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
    # BEGIN SOLUTION
    r, c = codes.shape
    words = (codes.to(torch.int64).reshape(r // 8, 8, c) << SHIFTS[None, :, None]).sum(dim=1)  # < 2^32
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)  # two's complement
    # END SOLUTION


def unpack_int4(packed: Tensor) -> Tensor:
    """Inverse of pack_int4: int32 (R/8, C) -> int32 codes (R, C)."""
    # BEGIN SOLUTION
    r8, c = packed.shape
    nibbles = (packed.to(torch.int64)[:, None, :] >> SHIFTS[None, :, None]) & 0xF  # (R/8, 8, C)
    return nibbles.reshape(r8 * 8, c).to(torch.int32)
    # END SOLUTION


def pack_v1(result: QuantResult) -> dict[str, Tensor]:
    """A 4-bit QuantResult -> the v1 tensors {qweight, qzeros, scales (fp16), g_idx}.

    Raises ValueError for a zero outside [1, 16]: v1 stores zero - 1 in 4 bits."""
    # BEGIN SOLUTION
    if result.zeros.numel() and (result.zeros.min() < 1 or result.zeros.max() > 16):
        raise ValueError("GPTQ v1 stores zero - 1 in 4 bits: zeros must lie in [1, 16] (a zero of 0 "
                         "needs the v2 format; a symmetric grid always has zero 8)")
    return {"qweight": pack_int4(result.codes.T.contiguous()),  # (K/8, N)
            "qzeros": pack_int4((result.zeros - 1).T.contiguous()).T.contiguous(),  # (G, N/8)
            "scales": result.scales.to(torch.float16).contiguous(),
            "g_idx": result.g_idx.to(torch.int32).contiguous()}
    # END SOLUTION


def dequantize_v1(tensors: dict[str, Tensor]) -> Tensor:
    """The v1 tensors -> W (N, K) float32."""
    # BEGIN SOLUTION
    codes = unpack_int4(tensors["qweight"])  # (K, N)
    zeros = unpack_int4(tensors["qzeros"].T.contiguous()).T + 1  # (G, N)
    g = tensors["g_idx"].long()
    return (tensors["scales"].float()[g] * (codes - zeros[g]).float()).T.contiguous()
    # END SOLUTION


def quantization_config(config: QuantConfig) -> dict:
    """config.json's quantization_config for a 4-bit v1 checkpoint."""
    if config.bits != 4:
        raise ValueError(f"the checkpoint format here is 4-bit, got bits={config.bits}")
    # BEGIN SOLUTION
    return {"quant_method": "gptq", "bits": 4, "group_size": config.group_size, "desc_act": config.desc_act,
            "sym": config.sym, "damp_percent": config.damp_percent, "checkpoint_format": "gptq"}
    # END SOLUTION


def save_checkpoint(folder: str | Path, layers: dict[str, dict[str, Tensor]], config: QuantConfig,
                    model_config: dict | None = None) -> Path:
    """Write folder/model.safetensors ("<layer>.qweight", ... for each layer's v1 tensors) and
    folder/config.json (model_config plus quantization_config). Returns the folder."""
    from safetensors.torch import save_file

    folder = Path(folder)
    # BEGIN SOLUTION
    folder.mkdir(parents=True, exist_ok=True)
    flat = {f"{name}.{key}": t[key].contiguous() for name, t in layers.items() for key in V1_KEYS}
    save_file(flat, str(folder / "model.safetensors"))
    cfg = dict(model_config or {}, quantization_config=quantization_config(config))
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return folder
    # END SOLUTION


def load_checkpoint(folder: str | Path) -> tuple[dict[str, dict[str, Tensor]], dict]:
    """Read a checkpoint written by save_checkpoint: ({layer: v1 tensors}, the whole config.json).

    Raises ValueError unless quantization_config says quant_method "gptq", bits 4 and format "gptq"."""
    from safetensors.torch import load_file

    folder = Path(folder)
    # BEGIN SOLUTION
    cfg = json.loads((folder / "config.json").read_text())
    q = cfg.get("quantization_config", {})
    if (q.get("quant_method"), q.get("bits"), q.get("checkpoint_format", "gptq")) != ("gptq", 4, "gptq"):
        raise ValueError(f"not a 4-bit GPTQ v1 checkpoint: quantization_config = {q}")
    layers: dict[str, dict[str, Tensor]] = {}
    for key, t in load_file(str(folder / "model.safetensors")).items():
        name, part = key.rsplit(".", 1)
        layers.setdefault(name, {})[part] = t
    return layers, cfg
    # END SOLUTION
