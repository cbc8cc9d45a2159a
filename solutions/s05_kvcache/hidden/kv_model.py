"""Executable models of the handout's rules, for the model-based hidden tests (judge side only).

Plain lists and dicts, written from the docstrings, not from the reference: the block pool (free
queue order, reference counts, a prefix cache keyed by the whole prefix a block ends, copy-on-write)
and the scheduler's phases (the radix cache's model is in test_model_radix_hidden.py); and
`run_trace`, which replays a pinned operation sequence on a test's state machine. The test files
import this module in the judge only: the worker never runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def run_trace(machine: Any, trace: list) -> None:
    """Replay a pinned operation sequence; a failure names it as Hypothesis would."""
    try:
        for name, kwargs in trace:
            getattr(machine, name)(**kwargs)
    except Exception as e:  # an assertion, or the package raising: noted with the trace, re-raised
        steps = "; ".join(f"state.{name}({', '.join(f'{k}={v!r}' for k, v in kw.items())})" for name, kw in trace)
        e.add_note(f"Falsifying example (a pinned trace): state = {type(machine).__name__}(); {steps}")
        raise
    finally:
        machine.teardown()


def sampled(seq_id: int, k: int) -> int:
    """The token output number k of a sequence samples (never a prompt token: those are < 100)."""
    return 1000 + seq_id * 100 + k


@dataclass
class MSeq:
    """A sequence as the model sees it."""

    seq_id: int
    tokens: list[int]
    num_prompt: int
    max_tokens: int
    stop: int | None = None
    status: str = "WAITING"
    computed: int = 0
    cached: int = 0
    table: list[int] = field(default_factory=list)
    num_hashes: int = 0  # len(block_hashes)
    preemptions: int = 0

    @property
    def completion(self) -> int:
        return len(self.tokens) - self.num_prompt

    @property
    def is_prefill(self) -> bool:
        return self.completion == 0 or len(self.tokens) - self.computed > 1


class BlockModel:
    """The pool: ref counts, the free queue (front = taken next) and the prefix cache."""

    def __init__(self, num_blocks: int, block_size: int, watermark: float, caching: bool) -> None:
        self.bs = block_size
        self.watermark_blocks = int(watermark * num_blocks)
        self.caching = caching
        self.ref = [0] * num_blocks
        self.free_queue = list(range(num_blocks))
        self.by_prefix: dict[tuple[int, ...], int] = {}  # the prefix a cached block ends -> its id
        self.prefix_of: dict[int, tuple[int, ...]] = {}  # the reverse, for eviction
        self.stats = [0, 0, 0]  # allocate calls, tokens looked up, tokens hit

    def need(self, num_tokens: int) -> int:
        return (num_tokens + self.bs - 1) // self.bs

    def take(self) -> int:
        block = self.free_queue.pop(0)
        if block in self.prefix_of:  # reusing a free cached block evicts it from the cache
            del self.by_prefix[self.prefix_of.pop(block)]
        self.ref[block] = 1
        return block

    def hits(self, tokens: list[int]) -> list[int]:
        if not self.caching:
            return []
        out = []
        for i in range((len(tokens) - 1) // self.bs):  # the last token is always computed
            block = self.by_prefix.get(tuple(tokens[: (i + 1) * self.bs]))
            if block is None:
                break
            out.append(block)
        return out

    def can_allocate(self, tokens: list[int]) -> bool:
        hits = self.hits(tokens)
        cost = self.need(len(tokens)) - len(hits) + sum(self.ref[b] == 0 for b in hits)
        return len(self.free_queue) - cost >= self.watermark_blocks

    def fits(self, tokens: list[int]) -> bool:
        """Whether allocate can physically succeed (watermark aside)."""
        hits = self.hits(tokens)
        cost = self.need(len(tokens)) - len(hits) + sum(self.ref[b] == 0 for b in hits)
        return cost <= len(self.free_queue)

    def allocate(self, seq: MSeq) -> None:
        hits = self.hits(seq.tokens)
        for b in hits:
            if self.ref[b] == 0:
                self.free_queue.remove(b)
            self.ref[b] += 1
        seq.table = hits + [self.take() for _ in range(self.need(len(seq.tokens)) - len(hits))]
        seq.num_hashes = len(hits)
        seq.computed = seq.cached = len(hits) * self.bs
        self.stats = [self.stats[0] + 1, self.stats[1] + len(seq.tokens), self.stats[2] + seq.cached]

    def cache_full_blocks(self, seq: MSeq) -> None:
        if not self.caching:
            return
        for i in range(seq.num_hashes, seq.computed // self.bs):
            prefix = tuple(seq.tokens[: (i + 1) * self.bs])
            seq.num_hashes += 1
            if prefix not in self.by_prefix:
                self.by_prefix[prefix] = seq.table[i]
                self.prefix_of[seq.table[i]] = prefix

    def can_append(self, seq: MSeq) -> bool:
        grows = len(seq.table) * self.bs < len(seq.tokens)
        shared = not grows and self.ref[seq.table[(len(seq.tokens) - 1) // self.bs]] > 1
        return not (grows or shared) or len(self.free_queue) > 0

    def append_slot(self, seq: MSeq) -> tuple[int, int] | None:
        if len(seq.table) * self.bs < len(seq.tokens):
            seq.table.append(self.take())
            return None
        i = (len(seq.tokens) - 1) // self.bs
        src = seq.table[i]
        if self.ref[src] == 1:
            return None
        dst = self.take()
        self.ref[src] -= 1
        seq.table[i] = dst
        return src, dst

    def free(self, seq: MSeq) -> None:
        for b in seq.table[::-1]:  # tail first: a chain loses its tail before its head
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.free_queue.append(b)
        seq.table, seq.num_hashes = [], 0

    def fork(self, parent: MSeq, child: MSeq) -> None:
        for b in parent.table:
            self.ref[b] += 1
        child.table, child.num_hashes = list(parent.table), parent.num_hashes
        child.computed, child.cached = parent.computed, parent.cached

    def observed(self, seqs: list[MSeq]) -> list:
        """What the tests compare with the package: the pool, then each listed sequence."""
        return [list(self.free_queue), list(self.ref), len(self.by_prefix), list(self.stats),
                [[s.seq_id, list(s.table), s.num_hashes, s.computed, s.cached] for s in seqs]]


@dataclass
class SchedConfig:
    max_num_seqs: int
    budget: int
    max_model_len: int
    policy: str
    chunked: bool


class SchedulerModel:
    """FCFS continuous batching over a BlockModel, phase by phase as SchedulerConfig describes."""

    def __init__(self, cfg: SchedConfig, pool: BlockModel) -> None:
        self.cfg, self.pool = cfg, pool
        self.waiting: list[MSeq] = []
        self.running: list[MSeq] = []
        self.live: dict[int, MSeq] = {}
        self.step = 0

    def add(self, seq: MSeq) -> None:
        self.waiting.append(seq)
        self.live[seq.seq_id] = seq

    def _entry(self, seq: MSeq, n: int) -> list:
        start = seq.computed
        slots = [seq.table[p // self.pool.bs] * self.pool.bs + p % self.pool.bs for p in range(start, start + n)]
        return [seq.seq_id, start, n, seq.is_prefill, start + n == len(seq.tokens), list(seq.table), slots]

    def _preempt(self, seq: MSeq) -> None:
        self.pool.free(seq)
        self.running.remove(seq)
        seq.computed = seq.cached = 0
        seq.preemptions += 1
        seq.status = "WAITING"
        self.waiting.insert(0, seq)

    def _decodes(self, plan: dict) -> None:
        for seq in list(self.running):
            if seq.status != "RUNNING" or seq.is_prefill:
                continue
            if plan["left"] == 0:
                break
            while not self.pool.can_append(seq):  # preempt the newest until the slot fits
                victim = self.running[-1]
                self._preempt(victim)
                plan["preempted"].append(victim.seq_id)
                if victim is seq:
                    break
            if seq.status != "RUNNING":
                continue
            copy = self.pool.append_slot(seq)
            if copy is not None:
                plan["copies"].append(list(copy))
            plan["entries"].append(self._entry(seq, 1))
            plan["left"] -= 1

    def _prefills(self, plan: dict) -> None:
        for seq in self.running:
            if plan["left"] == 0:
                return
            if seq.is_prefill:
                n = min(len(seq.tokens) - seq.computed, plan["left"])
                plan["entries"].append(self._entry(seq, n))
                plan["left"] -= n
        if plan["preempted"]:
            return
        while self.waiting and plan["left"] > 0 and len(self.running) < self.cfg.max_num_seqs:
            seq = self.waiting[0]
            if not self.pool.can_allocate(seq.tokens):
                return
            if not self.cfg.chunked and len(seq.tokens) > plan["left"]:  # all its tokens, not the prompt
                return
            self.waiting.pop(0)
            self.pool.allocate(seq)
            seq.status = "RUNNING"
            self.running.append(seq)
            n = min(len(seq.tokens) - seq.computed, plan["left"])
            plan["entries"].append(self._entry(seq, n))
            plan["left"] -= n

    def schedule(self) -> list:
        """[step, entries, preempted, copies]; an entry is [seq_id, start, n, is_prefill, samples,
        block_table, slot_mapping]."""
        plan = {"left": self.cfg.budget, "entries": [], "preempted": [], "copies": []}
        if self.cfg.policy == "decode_first":
            self._decodes(plan)
            self._prefills(plan)
        else:
            self._prefills(plan)
            if not plan["entries"]:
                self._decodes(plan)
        self.step += 1
        return [self.step - 1, plan["entries"], plan["preempted"], plan["copies"]]

    def update(self, entries: list, stop_ids: set[int]) -> list[int]:
        finished = []
        for seq_id, start, n, _, samples, _, _ in entries:
            seq = self.live[seq_id]
            seq.computed += n
            self.pool.cache_full_blocks(seq)
            if not samples:
                continue
            token = seq.stop if seq_id in stop_ids and seq.stop is not None else sampled(seq_id, seq.completion)
            seq.tokens.append(token)
            if seq.completion >= seq.max_tokens or token == seq.stop:
                seq.status = "FINISHED"
                self.pool.free(seq)
                self.running.remove(seq)
                del self.live[seq_id]
                finished.append(seq_id)
        return finished

    def observed(self) -> list:
        """The queues, the pool, and each live sequence's state."""
        seqs = sorted(self.live.values(), key=lambda s: s.seq_id)
        return [[s.seq_id for s in self.running], [s.seq_id for s in self.waiting], self.pool.observed(seqs),
                [[s.seq_id, s.status, len(s.tokens), s.preemptions] for s in seqs]]
