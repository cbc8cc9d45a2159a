"""Continuous batching: which sequences run in the next step, and how many tokens each computes.

One step = one forward pass over a batch of (sequence, chunk of tokens) entries. The scheduler
keeps a FCFS waiting queue and a running list in admission order, spends a token budget per step,
chunks long prefills, and preempts by recompute when the block pool runs dry. It only describes
the work (`Batch`); whoever runs the model calls `update` with the sampled tokens afterwards.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .block_manager import BlockManager
from .sequence import Sequence, SequenceStatus

Policy = Literal["prefill_first", "decode_first"]


@dataclass(frozen=True)
class SchedulerConfig:
    """Scheduling knobs.

    max_num_seqs: most sequences running at once (hence in one batch).
    max_num_batched_tokens: most tokens computed in one step (the token budget).
    max_model_len: longest sequence, prompt + output; longer requests are refused by `add`.
    policy: "prefill_first" (vLLM v0, Orca-style): a step holds only prefill work whenever there
        is any (ongoing chunks, then admissions); otherwise it decodes every running sequence.
        "decode_first" (SARATHI, vLLM v1): every running decode gets its token first, then the
        rest of the budget goes to prefill chunks (ongoing ones, then admissions); steps mix both.
    enable_chunked_prefill: a prefill may be split over steps to fit the budget. When off, a
        prompt is admitted only if all its tokens fit the budget left in the step, so the budget
        must hold max_model_len tokens.
    static_batching: request-level batching: once a batch starts decoding, nothing is admitted
        until every running sequence has finished.
    """

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    max_model_len: int = 2048
    policy: Policy = "decode_first"
    enable_chunked_prefill: bool = True
    static_batching: bool = False

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= max_num_seqs "
                f"({self.max_num_seqs}) so that every running sequence can decode in one step"
            )
        if self.max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2, got {self.max_model_len}")
        if self.policy not in ("prefill_first", "decode_first"):
            raise ValueError(f"policy must be 'prefill_first' or 'decode_first', got {self.policy!r}")
        if not self.enable_chunked_prefill and self.max_num_batched_tokens < self.max_model_len:
            raise ValueError(
                f"without chunked prefill max_num_batched_tokens ({self.max_num_batched_tokens}) must "
                f"be >= max_model_len ({self.max_model_len}), or long prompts could never run"
            )


@dataclass(frozen=True)
class BatchEntry:
    """One sequence's share of a step: it computes positions [start_pos, start_pos + num_tokens).

    samples: this chunk reaches the end of the sequence's tokens, so the model samples a token.
    token_ids: the tokens fed (seq.token_ids[start_pos : start_pos + num_tokens]).
    block_table: the sequence's block table for this step.
    slot_mapping: the KV slot written for each fed token (see `slot_mapping`).
    """

    seq_id: int
    start_pos: int
    num_tokens: int
    is_prefill: bool
    samples: bool
    token_ids: tuple[int, ...]
    block_table: tuple[int, ...]
    slot_mapping: tuple[int, ...]

    @property
    def context_len(self) -> int:
        """Tokens attended to by the last fed token (KV read in this step)."""
        return self.start_pos + self.num_tokens


@dataclass(frozen=True)
class Batch:
    """The plain description of one step.

    preempted: sequences preempted while this step was planned (recompute later; no KV to move).
    block_copies: (src_block, dst_block) copy-on-write copies to do before running the step.
    """

    step: int
    entries: tuple[BatchEntry, ...]
    preempted: tuple[int, ...] = ()
    block_copies: tuple[tuple[int, int], ...] = ()

    @property
    def num_seqs(self) -> int:
        return len(self.entries)

    @property
    def num_tokens(self) -> int:
        return sum(e.num_tokens for e in self.entries)

    @property
    def num_prefill_tokens(self) -> int:
        return sum(e.num_tokens for e in self.entries if e.is_prefill)

    @property
    def num_decode_tokens(self) -> int:
        return sum(e.num_tokens for e in self.entries if not e.is_prefill)

    @property
    def slot_mapping(self) -> tuple[int, ...]:
        return tuple(s for e in self.entries for s in e.slot_mapping)


def slot_mapping(block_table: list[int], start_pos: int, num_tokens: int, block_size: int) -> tuple[int, ...]:
    """KV slots of positions start_pos .. start_pos + num_tokens - 1: position p lives in slot
    block_table[p // block_size] * block_size + p % block_size. ValueError if the table is short."""
    end = start_pos + num_tokens
    if -(-end // block_size) > len(block_table):
        raise ValueError(f"block table of {len(block_table)} blocks cannot hold {end} tokens")
    return tuple(block_table[p // block_size] * block_size + p % block_size for p in range(start_pos, end))


@dataclass
class _StepPlan:
    """The batch being planned (internal)."""

    tokens_left: int
    entries: list[BatchEntry] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    copies: list[tuple[int, int]] = field(default_factory=list)


class Scheduler:
    """FCFS continuous-batching scheduler over a BlockManager.

    waiting: sequences without blocks, in the order they will be admitted (preempted ones go to
        the front). running: sequences holding blocks, in admission order (the last one is the
        most recently admitted, hence the first preemption victim).
    """

    def __init__(self, config: SchedulerConfig, block_manager: BlockManager) -> None:
        room = block_manager.num_blocks - block_manager.watermark_blocks
        if block_manager.blocks_needed(config.max_model_len) > room:
            raise ValueError(
                f"{block_manager.num_blocks} blocks (watermark {block_manager.watermark_blocks}) cannot "
                f"hold one sequence of max_model_len={config.max_model_len} tokens"
            )
        self.config = config
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.live: dict[int, Sequence] = {}  # seq_id -> sequence, waiting or running
        self.num_steps = 0
        self._batch_sealed = False  # static batching: the current batch has started decoding

    def has_unfinished(self) -> bool:
        return bool(self.live)

    def add(self, seq: Sequence) -> None:
        """Queue a new request at the back of `waiting`.

        ValueError if seq is not WAITING, owns blocks, reuses a live seq_id, or if its prompt
        plus max_tokens exceeds max_model_len (it could never finish).
        """
        if seq.status != SequenceStatus.WAITING or seq.block_table:
            raise ValueError(f"sequence {seq.seq_id} is not a fresh waiting sequence")
        if seq.seq_id in self.live:
            raise ValueError(f"sequence id {seq.seq_id} is already live")
        if seq.num_prompt_tokens + seq.max_tokens > self.config.max_model_len:
            raise ValueError(
                f"sequence {seq.seq_id}: {seq.num_prompt_tokens} prompt + {seq.max_tokens} output tokens "
                f"exceed max_model_len={self.config.max_model_len}"
            )
        self.waiting.append(seq)
        self.live[seq.seq_id] = seq

    def schedule(self) -> Batch:
        """Plan the next step (see SchedulerConfig.policy for the order of the phases).

        Always: batch tokens <= max_num_batched_tokens; running sequences <= max_num_seqs;
        admission is FCFS from the front of `waiting` and stops at the first sequence that does
        not fit (blocks via can_allocate, the budget, or max_num_seqs); no admission in a step
        that preempted. The step counter advances even when the batch is empty.
        """
        plan = _StepPlan(tokens_left=self.config.max_num_batched_tokens)
        if not self.running:
            self._batch_sealed = False
        if self.config.policy == "decode_first":
            self._schedule_decodes(plan)
            self._schedule_prefills(plan)
        else:
            self._schedule_prefills(plan)
            if not plan.entries:
                self._schedule_decodes(plan)
        if self.config.static_batching and any(not e.is_prefill for e in plan.entries):
            self._batch_sealed = True
        batch = Batch(self.num_steps, tuple(plan.entries), tuple(plan.preempted), tuple(plan.copies))
        self.num_steps += 1
        return batch

    def _entry(self, seq: Sequence, num_tokens: int) -> BatchEntry:
        """Describe seq computing its next num_tokens tokens (given)."""
        start = seq.num_computed_tokens
        return BatchEntry(
            seq_id=seq.seq_id,
            start_pos=start,
            num_tokens=num_tokens,
            is_prefill=seq.is_prefill,
            samples=start + num_tokens == seq.num_tokens,
            token_ids=tuple(seq.token_ids[start : start + num_tokens]),
            block_table=tuple(seq.block_table),
            slot_mapping=slot_mapping(seq.block_table, start, num_tokens, self.block_manager.block_size),
        )

    def _schedule_decodes(self, plan: _StepPlan) -> None:
        """One token for each running sequence that is decoding, in running order. A sequence
        whose next slot needs a block when none is free preempts the most recently admitted
        running sequence (possibly itself, which then gets no entry) until the slot fits."""
        for seq in list(self.running):
            if seq.status != SequenceStatus.RUNNING or seq.is_prefill:
                continue  # preempted earlier in this loop, or still prefilling
            if plan.tokens_left == 0:
                break
            while not self.block_manager.can_append(seq):
                victim = self.running[-1]
                self._preempt(victim)
                plan.preempted.append(victim.seq_id)
                if victim is seq:
                    break
            else:
                copy = self.block_manager.append_slot(seq)
                if copy is not None:
                    plan.copies.append(copy)
                plan.entries.append(self._entry(seq, 1))
                plan.tokens_left -= 1

    def _schedule_prefills(self, plan: _StepPlan) -> None:
        """Prefill work up to the budget: first the running sequences still prefilling (running
        order), then admissions from the front of `waiting`. A chunk is min(tokens left to
        compute, budget left); without chunked prefill a sequence is admitted only if all its
        num_tokens fit the budget left. Admitted sequences are allocated, marked RUNNING and
        appended to `running`."""
        for seq in self.running:
            if plan.tokens_left == 0:
                return
            if seq.is_prefill:
                n = min(seq.num_uncomputed_tokens, plan.tokens_left)
                plan.entries.append(self._entry(seq, n))
                plan.tokens_left -= n
        if plan.preempted or (self.config.static_batching and self._batch_sealed):
            return
        while self.waiting and plan.tokens_left > 0 and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0]
            if not self.block_manager.can_allocate(seq):
                break
            if not self.config.enable_chunked_prefill and seq.num_tokens > plan.tokens_left:
                break
            self.waiting.popleft()
            self.block_manager.allocate(seq)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            n = min(seq.num_uncomputed_tokens, plan.tokens_left)
            plan.entries.append(self._entry(seq, n))
            plan.tokens_left -= n

    def _preempt(self, seq: Sequence) -> None:
        """Preempt by recompute: free seq's blocks, reset its computed and cached counts, count
        the preemption, mark it WAITING and put it at the FRONT of `waiting`."""
        self.block_manager.free(seq)
        self.running.remove(seq)
        seq.num_computed_tokens = seq.num_cached_tokens = 0
        seq.num_preemptions += 1
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)

    def update(self, batch: Batch, new_tokens: Mapping[int, int]) -> list[Sequence]:
        """Apply a finished step: advance each entry's num_computed_tokens, register blocks that
        became full (`cache_full_blocks`), append the sampled token new_tokens[seq_id] for each
        entry that samples, and finish sequences that reached max_tokens or sampled a stop
        token (FINISHED, blocks freed, removed from running). Returns the finished sequences.
        ValueError if an entry no longer matches its sequence (a stale or replayed batch) or a
        sampled token is missing.
        """
        finished = []
        for e in batch.entries:
            seq = self.live.get(e.seq_id)
            if seq is None or seq.status != SequenceStatus.RUNNING or seq.num_computed_tokens != e.start_pos:
                raise ValueError(f"batch entry for sequence {e.seq_id} is stale")
            seq.num_computed_tokens += e.num_tokens
            self.block_manager.cache_full_blocks(seq)
            if not e.samples:
                continue
            if e.seq_id not in new_tokens:
                raise ValueError(f"no sampled token for sequence {e.seq_id}")
            token = new_tokens[e.seq_id]
            seq.append_token(token)
            if seq.num_completion_tokens >= seq.max_tokens or token in seq.stop_token_ids:
                self._finish(seq)
                finished.append(seq)
        return finished

    def _finish(self, seq: Sequence) -> None:
        """Retire a sequence (given)."""
        seq.status = SequenceStatus.FINISHED
        self.block_manager.free(seq)
        self.running.remove(seq)
        del self.live[seq.seq_id]
