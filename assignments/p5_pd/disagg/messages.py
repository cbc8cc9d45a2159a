"""What crosses between the router, the prefill worker and the decode workers.

The router hands the prefill worker `PrefillRequest`s; the prefill worker answers each with a
`KVMessage` (the first token and the KV of the prompt positions the decode side lacks); a decode
worker answers with `DecodeOutput`s. All are frozen dataclasses: plain values, safe to copy,
send or log.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Request:
    """A client's request as the router keeps it. max_tokens counts the first token too."""

    request_id: int
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if not self.prompt_token_ids:
            raise ValueError(f"request {self.request_id}: empty prompt")
        if self.max_tokens < 1:
            raise ValueError(f"request {self.request_id}: max_tokens must be >= 1, got {self.max_tokens}")


@dataclass(frozen=True)
class PrefillRequest:
    """Prefill `prompt_token_ids` and send the KV of positions skip_tokens..len-1 (the decode side
    holds the first skip_tokens already: a prefix-cache hit there)."""

    request_id: int
    prompt_token_ids: tuple[int, ...]
    skip_tokens: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.skip_tokens < len(self.prompt_token_ids):
            raise ValueError(f"request {self.request_id}: skip_tokens {self.skip_tokens} outside "
                             f"0..{len(self.prompt_token_ids) - 1}")


@dataclass(frozen=True)
class KVMessage:
    """The prefill worker's answer for one request.

    first_token: the token sampled (greedy) after the prompt.
    start: the first prompt position whose KV this message carries.
    kv: (num_layers, 2, len(prompt_token_ids) - start, num_kv_heads, head_dim), K then V, token-major.
    """

    request_id: int
    prompt_token_ids: tuple[int, ...]
    first_token: int
    start: int
    kv: Tensor

    @property
    def nbytes(self) -> int:
        """Bytes of KV this message carries."""
        return self.kv.numel() * self.kv.element_size()


@dataclass(frozen=True)
class DecodeOutput:
    """A finished request: every generated token (the prefill's first one included) and why it stopped
    ("stop": a stop token, kept in token_ids; "length": max_tokens, or the decode side's max_model_len)."""

    request_id: int
    token_ids: tuple[int, ...]
    finish_reason: str


def kv_bytes(num_tokens: int, num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> int:
    """The KV bytes of num_tokens tokens: K and V, every layer and KV head, head_dim elements of dtype."""
    raise NotImplementedError("p5.7: kv_bytes")
