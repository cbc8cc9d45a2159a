"""Turning next-token logits into a token: greedy, temperature, top-k, top-p, min-p, repetition penalty.

Every filter takes logits (B, V) and returns float32 logits (B, V) where removed tokens are -inf
and kept tokens keep their value, so softmax of the result is the filtered, renormalised
distribution. Ties at a filter's boundary may go either way (tests avoid them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class SamplingParams:
    """How to pick the next token. The defaults sample from the model's plain distribution."""

    temperature: float = 1.0  # 0 = greedy (argmax); otherwise logits are divided by it
    top_k: int = 0  # keep the k most likely tokens; 0 = off
    top_p: float = 1.0  # keep the smallest top set holding probability >= top_p; 1 = off
    min_p: float = 0.0  # keep tokens with prob >= min_p * max prob; 0 = off
    repetition_penalty: float = 1.0  # > 1 discourages tokens already in the sequence; 1 = off

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0 (0 = off), got {self.top_k!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if not self.repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


GREEDY = SamplingParams(temperature=0.0)


def apply_repetition_penalty(logits: Tensor, prev_tokens: Tensor, penalty: float) -> Tensor:
    """Discourage every token id that occurs in `prev_tokens` (B, S) of its row (CTRL / HF rule).

    A seen token's logit is divided by `penalty` if it is positive and multiplied by it otherwise,
    once, however many times the token occurs. Other logits are unchanged. Returns float32 (B, V).
    """
    logits = logits.float().clone()
    seen = logits.gather(-1, prev_tokens)  # (B, S)
    seen = torch.where(seen > 0, seen / penalty, seen * penalty)
    return logits.scatter(-1, prev_tokens, seen)


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the k largest logits of each row (all of them when k >= V), set the rest to -inf."""
    logits = logits.float()
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (B, 1): the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose total probability is >= p.

    Sort the probabilities in decreasing order; a token is kept iff the mass of the tokens
    strictly before it is < p. The most likely token is always kept. Returns float32 (B, V).
    """
    logits = logits.float()
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    sorted_probs = torch.softmax(sorted_logits, dim=-1)
    cum_probs = sorted_probs.cumsum(dim=-1)
    keep_sorted = cum_probs - sorted_probs < p  # mass strictly before each token
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def min_p_filter(logits: Tensor, min_p: float) -> Tensor:
    """Keep tokens whose probability is >= min_p times the row's largest probability."""
    logits = logits.float()
    # p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p): no exp, no underflow.
    threshold = logits.amax(dim=-1, keepdim=True) + torch.log(torch.tensor(min_p, device=logits.device))
    return logits.masked_fill(logits < threshold, float("-inf"))


def process_logits(logits: Tensor, params: SamplingParams, prev_tokens: Tensor | None = None) -> Tensor:
    """The full pipeline, in HF's order: repetition penalty (needs prev_tokens (B, S)), then
    temperature, top-k, top-p, min-p; each step is skipped when its parameter is "off".
    For greedy params the temperature step is skipped (argmax does not need it).
    logits: (B, V). Returns float32 (B, V) logits, removed tokens at -inf.
    """
    logits = logits.float()
    if params.repetition_penalty != 1.0 and prev_tokens is not None:
        logits = apply_repetition_penalty(logits, prev_tokens, params.repetition_penalty)
    if params.greedy:
        return logits
    logits = logits / params.temperature
    if params.top_k > 0:
        logits = top_k_filter(logits, params.top_k)
    if params.top_p < 1.0:
        logits = top_p_filter(logits, params.top_p)
    if params.min_p > 0.0:
        logits = min_p_filter(logits, params.min_p)
    return logits


def sample(
    logits: Tensor,
    params: SamplingParams,
    *,
    generator: torch.Generator | None = None,
    prev_tokens: Tensor | None = None,
) -> Tensor:
    """One token per row of `logits` (B, V): the argmax of the processed logits when
    params.greedy, else a draw from softmax(process_logits(...)) with `torch.multinomial` using
    `generator` (the same generator state gives the same tokens). Returns int64 (B,).
    """
    logits = process_logits(logits, params, prev_tokens)
    if params.greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)
