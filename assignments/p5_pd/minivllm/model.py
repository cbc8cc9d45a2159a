"""LLaMA over a flat varlen batch (given: the engine, not the model, is the point of this capstone).

Numerics follow HF `LlamaForCausalLM`: RMSNorm in fp32, RoPE cos/sin computed in fp32 then cast,
SwiGLU MLP, no biases. Parameter names match the HF checkpoint, so `load_weights` is a plain
state-dict load from the folder's safetensors files. RoPE's angles come from stage 1's
`transformer.rope_cos_sin`. With the "torch" backend the layers are stage 1's `transformer.rms_norm`
and `transformer.apply_rope` (laid out for this model's (tokens, heads, head_dim) rows); with the
"triton" backend (CUDA), the residual add + RMSNorm, RoPE and SwiGLU's activation each run as one
fused kernel (`fused_triton`) with the same rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
import transformer
from safetensors.torch import load_file
from torch import Tensor, nn

from .attention import AttentionMetadata, attend, store_kvcache
from .config import ModelConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, fused: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.fused = fused

    def forward(self, x: Tensor, residual: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Returns (norm(s), s) with s = x + residual, or s = x without a residual: s is the
        residual stream the next block adds to."""
        if self.fused:
            from .fused_triton import rms_norm

            return rms_norm(x, self.weight, self.eps, residual)
        s = x if residual is None else x + residual
        return transformer.rms_norm(s, self.weight, self.eps), s


def rope_cos_sin(positions: Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """positions (T,) -> cos, sin of shape (T, 1, head_dim) in dtype: stage 1's fp32 `rope_cos_sin`
    of one sequence of T positions, cast once for every layer and laid out to broadcast over heads."""
    cos, sin = transformer.rope_cos_sin(positions[None], head_dim, theta)  # (1, T, head_dim) fp32
    return cos[0, :, None].to(dtype), sin[0, :, None].to(dtype)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x: (T, heads, head_dim), cos, sin: (T, 1, head_dim). Stage 1's `apply_rope` on views: it takes
    x as (batch, heads, T, head_dim) and cos, sin as (batch, T, head_dim)."""
    out = transformer.apply_rope(x.transpose(0, 1)[None], cos.transpose(0, 1), sin.transpose(0, 1))
    return out[0].transpose(0, 1)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, backend: str) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.scale = cfg.head_dim ** -0.5
        self.backend = backend
        self.rope = apply_rope
        if backend == "triton":
            from .fused_triton import rope

            self.rope = rope
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.num_heads * cfg.head_dim, cfg.hidden_size, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, meta: AttentionMetadata,
                k_cache: Tensor, v_cache: Tensor) -> Tensor:
        t = x.shape[0]
        q = self.rope(self.q_proj(x).view(t, self.num_heads, self.head_dim), cos, sin)
        k = self.rope(self.k_proj(x).view(t, self.num_kv_heads, self.head_dim), cos, sin)
        v = self.v_proj(x).view(t, self.num_kv_heads, self.head_dim)
        store_kvcache(k, v, k_cache, v_cache, meta.slot_mapping)
        out = attend(q, k_cache, v_cache, meta, self.scale, self.backend)  # (T, H, D)
        return self.o_proj(out.reshape(t, self.num_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig, fused: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.fused = fused

    def forward(self, x: Tensor) -> Tensor:
        if self.fused:
            from .fused_triton import silu_mul

            return self.down_proj(silu_mul(self.gate_proj(x), self.up_proj(x)))
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, backend: str) -> None:
        super().__init__()
        fused = backend == "triton"
        self.self_attn = Attention(cfg, backend)
        self.mlp = MLP(cfg, fused)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, fused)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, fused)

    def forward(self, x: Tensor, residual: Tensor | None, cos: Tensor, sin: Tensor, meta: AttentionMetadata,
                kv: Tensor) -> tuple[Tensor, Tensor]:
        """x: the previous block's output, residual: the stream it adds to (None before the first
        layer). Returns this layer's MLP output and the stream it adds to (HF's two residual adds,
        each done by the next RMSNorm)."""
        h, residual = self.input_layernorm(x, residual)
        h = self.self_attn(h, cos, sin, meta, kv[0], kv[1])
        h, residual = self.post_attention_layernorm(h, residual)
        return self.mlp(h), residual


class LlamaModel(nn.Module):
    def __init__(self, cfg: ModelConfig, backend: str) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, backend) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, backend == "triton")


class LlamaForCausalLM(nn.Module):
    """forward(input_ids (T,), positions (T,), meta, kv_cache) -> final hidden states (T, hidden).

    kv_cache: (num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim); layer l reads and
    writes kv_cache[l, 0] (keys) and kv_cache[l, 1] (values).
    """

    def __init__(self, cfg: ModelConfig, backend: str = "torch") -> None:
        super().__init__()
        self.config = cfg
        self.model = LlamaModel(cfg, backend)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    @classmethod
    def build(cls, cfg: ModelConfig, backend: str, device: torch.device, dtype: torch.dtype) -> LlamaForCausalLM:
        """A randomly initialised model on `device` in `dtype`."""
        with torch.device(device):
            model = cls(cfg, backend).to(dtype)
        return model.eval()

    def forward(self, input_ids: Tensor, positions: Tensor, meta: AttentionMetadata, kv_cache: Tensor) -> Tensor:
        x = self.model.embed_tokens(input_ids)
        cos, sin = rope_cos_sin(positions, self.config.head_dim, self.config.rope_theta, x.dtype)
        residual = None
        for layer, kv in zip(self.model.layers, kv_cache):
            x, residual = layer(x, residual, cos, sin, meta, kv)
        return self.model.norm(x, residual)[0]

    def compute_logits(self, hidden: Tensor) -> Tensor:
        """(S, hidden) -> fp32 logits (S, vocab)."""
        return self.lm_head(hidden).float()


# Loaders of quantized checkpoints, by config.json's quantization_config.quant_method. A later package
# registers its own (P3's gptq.engine registers "gptq"), as vLLM maps quant methods to linear layers.
WEIGHT_LOADERS: dict[str, Callable[[LlamaForCausalLM, Path], None]] = {}


def load_weights(model: LlamaForCausalLM, model_path: str | Path) -> None:
    """Loads every `*.safetensors` file of an HF folder into `model` (strict; tied lm_head allowed).

    A quantized checkpoint goes to the loader registered for its quant method in WEIGHT_LOADERS."""
    method = model.config.quant_method
    if method is not None:
        if method not in WEIGHT_LOADERS:
            raise ValueError(f"{model_path} is quantized with quant_method {method!r} and no loader is registered "
                             f"for it (known: {sorted(WEIGHT_LOADERS)}); import the package that provides it first")
        WEIGHT_LOADERS[method](model, Path(model_path))
        return
    files = sorted(Path(model_path).glob("*.safetensors"))
    if not files:
        raise ValueError(f"no .safetensors file in {model_path}")
    state: dict[str, Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    if "lm_head.weight" not in state and model.config.tie_word_embeddings:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"checkpoint mismatch: missing {missing}, unexpected {unexpected}")
