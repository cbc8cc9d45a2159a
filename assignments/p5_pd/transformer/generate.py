"""Autoregressive generation: one prefill over the prompt, then one token per step."""

from __future__ import annotations

import torch
from torch import Tensor

from transformer.model import Llama
from transformer.sampling import GREEDY, SamplingParams, sample


@torch.no_grad()
def generate(
    model: Llama,
    input_ids: Tensor,
    *,
    max_new_tokens: int,
    sampling: SamplingParams = GREEDY,
    generator: torch.Generator | None = None,
    attention_mask: Tensor | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    use_cache: bool = True,
) -> Tensor:
    """Extend each prompt of the batch by up to `max_new_tokens` tokens.

    input_ids: (B, S) prompts, left-padded to a common length S when they differ, with
    attention_mask (B, S) marking real tokens by 1 (None = no padding).
    Each step picks one token per row with `sample(logits of the last slot, sampling,
    generator=generator, prev_tokens=<the row's tokens so far, prompt included>)` and appends it
    (attention mask 1). With `use_cache` the prompt is run once (prefill) into a KV cache of
    S + max_new_tokens slots and each step feeds only the newest token; without it every step
    recomputes the whole sequence (the reference the cached path must equal).
    A row that has produced `eos_token_id` is finished: its later tokens are `pad_token_id`
    (default: eos_token_id). Generation stops early once every row is finished.
    Returns int64 (B, S + n): the prompts followed by the n <= max_new_tokens new tokens.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if input_ids.ndim != 2:
        raise ValueError(f"input_ids must be (B, S), got shape {tuple(input_ids.shape)}")
    if attention_mask is not None and attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask {tuple(attention_mask.shape)} must match input_ids {tuple(input_ids.shape)}")
    b, s = input_ids.shape
    pad = pad_token_id if pad_token_id is not None else eos_token_id
    mask = attention_mask.long() if attention_mask is not None else torch.ones_like(input_ids)
    tokens = input_ids
    finished = torch.zeros(b, dtype=torch.bool, device=input_ids.device)
    cache = model.new_cache(b, s + max_new_tokens) if use_cache else None
    step_ids = input_ids  # what the next forward pass sees: the prompt, then one token at a time
    for _ in range(max_new_tokens):
        logits = model(step_ids if use_cache else tokens, attention_mask=mask, cache=cache)  # (B, T, V)
        next_ids = sample(logits[:, -1], sampling, generator=generator, prev_tokens=tokens)  # (B,)
        if eos_token_id is not None:
            next_ids = torch.where(finished, torch.full_like(next_ids, pad), next_ids)
            finished |= next_ids == eos_token_id
        tokens = torch.cat([tokens, next_ids[:, None]], dim=1)
        mask = torch.cat([mask, mask.new_ones(b, 1)], dim=1)
        step_ids = next_ids[:, None]
        if finished.all():
            break
    return tokens
