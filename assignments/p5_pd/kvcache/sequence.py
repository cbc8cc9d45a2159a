"""A request's state as plain data: its tokens, how many have KV in the cache, and its block table.

No logic lives here beyond derived counts: the block manager writes `block_table`, `block_hashes`
and the cache counters, the scheduler writes `status` and `num_computed_tokens`, and whoever runs
the model appends the sampled tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto


class SequenceStatus(Enum):
    WAITING = auto()  # queued (new, or preempted): owns no KV blocks
    RUNNING = auto()  # admitted: owns KV blocks for all its tokens
    FINISHED = auto()  # done: its blocks are back in the pool (perhaps still cached)


@dataclass(eq=False)  # identity equality: two requests with the same tokens are still two requests
class Sequence:
    """One request.

    token_ids: the prompt followed by the generated tokens. Preemption never drops generated tokens:
        a preempted sequence is recomputed from all of them.
    max_tokens: how many tokens to generate (the request's output length).
    arrival_time: when the request arrived, in seconds (the simulator's clock).
    stop_token_ids: sampled tokens that end the request early (kept in the output).
    status: WAITING, RUNNING or FINISHED.
    num_computed_tokens: leading tokens whose K/V are in the cache. The next step computes tokens
        [num_computed_tokens, num_computed_tokens + n). After a preemption: 0.
    num_cached_tokens: tokens served by prefix-cache hits when the sequence was last admitted.
    block_table: physical block ids; logical block i holds tokens [i * block_size, (i + 1) * block_size).
    block_hashes: chained hashes of the leading full, computed blocks, one per block (its length
        is at most len(block_table)); each is registered in the prefix cache, possibly for another
        block with the same content.
    num_preemptions: how many times the scheduler preempted this sequence.
    first_token_time, finish_time: clock readings set by whoever drives the scheduler (None until then).
    """

    seq_id: int
    prompt_token_ids: list[int]
    max_tokens: int
    arrival_time: float = 0.0
    stop_token_ids: tuple[int, ...] = ()
    token_ids: list[int] = field(init=False)
    status: SequenceStatus = SequenceStatus.WAITING
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    num_preemptions: int = 0
    first_token_time: float | None = None
    finish_time: float | None = None

    def __post_init__(self) -> None:
        if not self.prompt_token_ids:
            raise ValueError(f"sequence {self.seq_id}: a prompt needs at least one token")
        if self.max_tokens < 1:
            raise ValueError(f"sequence {self.seq_id}: max_tokens must be >= 1, got {self.max_tokens}")
        self.prompt_token_ids = list(self.prompt_token_ids)
        self.token_ids = list(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_completion_tokens(self) -> int:
        return len(self.token_ids) - len(self.prompt_token_ids)

    @property
    def completion_token_ids(self) -> list[int]:
        return self.token_ids[len(self.prompt_token_ids) :]

    @property
    def num_uncomputed_tokens(self) -> int:
        """Tokens still to feed to the model before the next token can be sampled."""
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def is_prefill(self) -> bool:
        """True until the prompt (or, after a preemption, every token but the last) has KV.

        A decoding sequence feeds exactly one token per step: the one it sampled last.
        """
        return self.num_completion_tokens == 0 or self.num_uncomputed_tokens > 1

    @property
    def is_finished(self) -> bool:
        return self.status == SequenceStatus.FINISHED

    def block_tokens(self, i: int, block_size: int) -> list[int]:
        """Token ids of logical block i (the last block may be partial)."""
        return self.token_ids[i * block_size : (i + 1) * block_size]

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)
