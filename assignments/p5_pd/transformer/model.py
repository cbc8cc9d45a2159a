"""The decoder layer, the whole model, and loading a Hugging Face checkpoint folder."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import Tensor, nn

from transformer.attention import Attention, causal_mask
from transformer.cache import KVCache
from transformer.config import LlamaConfig
from transformer.mlp import MLP
from transformer.norm import RMSNorm
from transformer.rope import position_ids_for, rope_cos_sin


class DecoderLayer(nn.Module):
    """Pre-norm residual block: attention then MLP (HF keys: `model.layers.N.*`)."""

    def __init__(self, config: LlamaConfig, layer_idx: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config, layer_idx)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None, cache: KVCache | None) -> Tensor:
        """h = x + attn(input_layernorm(x)); out = h + mlp(post_attention_layernorm(h)).

        x: (B, T, hidden); cos, sin, mask, cache: as for `Attention.forward`. Returns (B, T, hidden).
        """
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class Llama(nn.Module):
    """A LLaMA causal language model; parameter names are HF's minus the `model.` prefix."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def new_cache(self, batch_size: int, max_len: int) -> KVCache:
        """An empty KV cache for this model's dtype and device."""
        weight = self.embed_tokens.weight
        return KVCache.allocate(self.config, batch_size, max_len, dtype=weight.dtype, device=weight.device)

    def forward(
        self,
        input_ids: Tensor,
        *,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Logits of the T new tokens `input_ids` (B, T), given `cache.length` earlier tokens.

        attention_mask: (B, past + T) with 1 = real token, 0 = left padding, over every slot
        (cached and new); None = no padding. position_ids: (B, T) RoPE positions; None = derive
        them with `position_ids_for`. cache: None (no past: T is the whole sequence) or a KVCache
        holding `past = cache.length` slots for the same B rows; the new keys/values are appended
        and the cache advanced by T. Returns logits (B, T, vocab) in the model's dtype.

        Steps: RoPE positions (`position_ids_for`) and their cos/sin (`rope_cos_sin`); the mask
        over the past + T slots (`causal_mask`); embed; every layer; `cache.advance(T)` once, after
        the last layer has written its keys; final norm; lm_head.
        """
        b, t = input_ids.shape
        past = cache.length if cache is not None else 0
        if attention_mask is not None and tuple(attention_mask.shape) != (b, past + t):
            shape = tuple(attention_mask.shape)
            raise ValueError(f"attention_mask must be (B, past + T) = {(b, past + t)}, got {shape}")
        if position_ids is not None and tuple(position_ids.shape) != (b, t):
            raise ValueError(f"position_ids must be (B, T) = {(b, t)}, got {tuple(position_ids.shape)}")
        if position_ids is None:
            position_ids = position_ids_for(t, past, attention_mask, b, input_ids.device)
        cos, sin = rope_cos_sin(position_ids, self.config.head_dim, self.config.rope_theta)  # (B, T, D)
        mask = causal_mask(t, past + t, attention_mask, device=input_ids.device)  # (B|1, 1, T, S)
        h = self.embed_tokens(input_ids)  # (B, T, hidden)
        for layer in self.layers:
            h = layer(h, cos, sin, mask, cache)
        if cache is not None:
            cache.advance(t)
        return self.lm_head(self.norm(h))


def _read_safetensors(folder: Path) -> dict[str, Tensor]:
    """All tensors of `model.safetensors`, or of every shard listed in its index."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").is_file():
        shards = ["model.safetensors"]
    else:
        raise FileNotFoundError(f"{folder}: no model.safetensors (or its .index.json)")
    state: dict[str, Tensor] = {}
    for shard in shards:
        state.update(load_file(str(folder / shard)))
    return state


def load_model(path: str | Path, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> Llama:
    """Build a `Llama` from an HF folder (config.json + safetensors) in eval mode."""
    folder = Path(path)
    config = LlamaConfig.from_json(folder)
    state = {}
    for name, tensor in _read_safetensors(folder).items():
        if name.endswith("rotary_emb.inv_freq"):
            continue  # recomputed from rope_theta; old checkpoints stored it
        state[name.removeprefix("model.")] = tensor.to(device=device, dtype=dtype)
    if "lm_head.weight" not in state and config.tie_word_embeddings:
        state["lm_head.weight"] = state["embed_tokens.weight"]
    with torch.device("meta"):  # no random init: every tensor comes from the checkpoint
        model = Llama(config)
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()
