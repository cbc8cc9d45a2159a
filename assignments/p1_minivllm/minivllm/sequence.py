"""A request's state as plain data: its tokens, how many have KV in the cache, and its block table."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any

from .sampling_params import SamplingParams


class SequenceStatus(Enum):
    WAITING = auto()  # queued (new, or preempted): owns no KV blocks
    RUNNING = auto()  # admitted: owns KV blocks for its tokens
    FINISHED = auto()


@dataclass(eq=False)  # identity equality: two requests with the same tokens are still two requests
class Sequence:
    """One request.

    token_ids: prompt followed by the generated tokens. Preemption never drops generated tokens.
    num_computed_tokens: leading tokens whose K/V are written in the cache (after a preemption: 0).
        The next step computes tokens [num_computed_tokens, num_computed_tokens + n).
    num_cached_tokens: tokens served by prefix-cache hits when the sequence was last admitted.
    block_table: physical block ids; logical block i holds tokens [i * block_size, (i + 1) * block_size).
    block_hashes: chained hashes of the leading full blocks already registered or hit in the prefix
        cache, one per block (a prefix of block_table).
    generator: the request's own torch.Generator when params.seed is set.
    """

    seq_id: int
    token_ids: list[int]
    params: SamplingParams
    block_size: int
    num_prompt_tokens: int = field(init=False)  # len(token_ids) at creation
    status: SequenceStatus = SequenceStatus.WAITING
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    generator: Any = None
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        if not self.token_ids:
            raise ValueError("a prompt needs at least one token")
        self.token_ids = list(self.token_ids)
        self.num_prompt_tokens = len(self.token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_completion_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def completion_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def num_blocks(self) -> int:
        """Blocks needed to hold all current tokens: ceil(num_tokens / block_size)."""
        return -(-self.num_tokens // self.block_size)

    @property
    def is_finished(self) -> bool:
        return self.status == SequenceStatus.FINISHED

    def block_tokens(self, i: int) -> list[int]:
        """Token ids of logical block i (the last block may be partial)."""
        return self.token_ids[i * self.block_size : (i + 1) * self.block_size]

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)
