"""Decides, every step, which sequences compute how many tokens (continuous batching).

One step has a budget of `max_num_batched_tokens` tokens and at most `max_num_seqs` running
sequences. Running sequences go first, oldest first (a decode costs 1 token, a partly prefilled
prompt continues); then waiting sequences are admitted first-come first-served. When a running
sequence needs a new KV block and none is free, the newest running sequence is preempted by
recomputation: its blocks are freed and it returns to the front of the queue, keeping its tokens.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .block_manager import BlockManager
from .config import EngineConfig
from .sequence import Sequence, SequenceStatus


@dataclass
class ScheduledSeq:
    """seq computes tokens [seq.num_computed_tokens, seq.num_computed_tokens + num_tokens) this step."""

    seq: Sequence
    num_tokens: int


class Scheduler:
    """Owns the queues: `waiting` (deque, front first) and `running` (list, oldest first)."""

    def __init__(self, config: EngineConfig, block_manager: BlockManager, max_model_len: int,
                 eos_token_ids: tuple[int, ...] = ()) -> None:
        self.config = config
        self.block_manager = block_manager
        self.max_model_len = max_model_len
        self.eos_token_ids = frozenset(eos_token_ids)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0

    def add(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> list[ScheduledSeq]:
        """Picks this step's work, in order: running sequences, then newly admitted ones.

        1. For each running sequence, oldest first, while budget remains: it needs
           n = min(num_tokens - num_computed_tokens, budget) tokens; `_reserve_slots` makes sure its
           block table covers all its tokens (this may preempt newer sequences, or the sequence itself,
           which then is not scheduled).
        2. Unless a sequence was preempted in this step, admit waiting sequences from the front while
           budget remains, fewer than max_num_seqs run, and `block_manager.can_allocate` agrees;
           without chunked prefill a sequence is admitted only if all its tokens fit in the budget.
           An admitted sequence gets `block_manager.allocate` (prefix-cache hits count as computed),
           status RUNNING, joins the end of `running`, and is scheduled for
           min(num_tokens - num_computed_tokens, budget) tokens.
        The token budget is charged n for each scheduled sequence.
        """
        raise NotImplementedError("p1.17: Scheduler.schedule")

    def _reserve_slots(self, seq: Sequence) -> bool:
        """Grows seq's block table to cover all its tokens, preempting the newest running sequences
        (`_preempt`) while no block is free. Returns False when seq itself had to be preempted."""
        raise NotImplementedError("p1.18: Scheduler._reserve_slots")

    def _preempt(self, seq: Sequence) -> None:
        """Recompute preemption: seq frees its blocks, forgets its computed KV, keeps all its tokens
        (prompt and generated), goes back to the front of `waiting` as WAITING, and counts in
        num_preemptions."""
        raise NotImplementedError("p1.19: Scheduler._preempt")

    def postprocess(self, scheduled: list[ScheduledSeq], sampled: list[int | None]) -> list[Sequence]:
        """Applies a step's results; returns the sequences that finished in it.

        For each scheduled sequence: advance num_computed_tokens by its num_tokens and register its
        newly full blocks (`block_manager.cache_blocks`). If its tokens are now all computed, append
        its sampled token (sampled[i]; None for a prefill chunk that did not reach the end) and, if
        `_stop_reason` gives a reason, mark it FINISHED with that finish_reason, free its blocks and
        remove it from `running`.
        """
        raise NotImplementedError("p1.20: Scheduler.postprocess")

    def _stop_reason(self, seq: Sequence, token: int) -> str | None:
        """"stop" after EOS (unless ignore_eos) or a stop token, "length" at max_tokens or
        max_model_len, None to continue."""
        if token in seq.params.stop_token_ids or (token in self.eos_token_ids and not seq.params.ignore_eos):
            return "stop"
        if seq.num_completion_tokens >= seq.params.max_tokens or seq.num_tokens >= self.max_model_len:
            return "length"
        return None
