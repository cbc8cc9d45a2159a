"""An executable model of the engine's step, for the model-based hidden test (judge side only).

Plain lists and dicts written from the handout's rules, not from the reference: the README's
contract (requests, a step, metrics, num_preemptions) over stage 5's kvcache as its docstrings
state it (the block pool's free queue and prefix cache, the scheduler's phases, recompute
preemption); and `run_trace`, which replays a pinned operation sequence on the test's machine. The
test imports this module in the judge only: the worker never runs it.
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


@dataclass
class MReq:
    """A request as the model sees it; `steps` are the indices of the operations that stamp metrics."""

    seq_id: int
    tokens: list[int]
    num_prompt: int
    max_tokens: int
    stop: tuple[int, ...]
    status: str = "WAITING"
    computed: int = 0
    cached: int = 0
    table: list[int] = field(default_factory=list)
    num_hashes: int = 0
    arrival: int = 0
    first_scheduled: int | None = None
    first_token: int | None = None
    finished: int | None = None

    @property
    def completion(self) -> list[int]:
        return self.tokens[self.num_prompt:]

    @property
    def is_prefill(self) -> bool:
        return len(self.completion) == 0 or len(self.tokens) - self.computed > 1

    def output(self) -> list:
        """[request_id, token_ids, finish_reason, num_cached_tokens]: what step() returns for it."""
        reason = "stop" if self.tokens[-1] in self.stop else "length"
        return [str(self.seq_id), list(self.completion), reason, self.cached]


class PoolModel:
    """The block pool: reference counts, the free queue (front = taken next) and the prefix cache,
    keyed by the whole prefix a full block ends (what a chained hash with a token check names)."""

    def __init__(self, num_blocks: int, block_size: int, caching: bool) -> None:
        self.bs, self.caching = block_size, caching
        self.ref = [0] * num_blocks
        self.free_queue = list(range(num_blocks))
        self.by_prefix: dict[tuple[int, ...], int] = {}
        self.prefix_of: dict[int, tuple[int, ...]] = {}

    def need(self, num_tokens: int) -> int:
        return -(-num_tokens // self.bs)

    def take(self) -> int:
        block = self.free_queue.pop(0)
        if block in self.prefix_of:  # a free cached block taken for new tokens leaves the cache
            del self.by_prefix[self.prefix_of.pop(block)]
        self.ref[block] = 1
        return block

    def hits(self, tokens: list[int]) -> list[int]:
        out: list[int] = []
        if self.caching:
            for i in range((len(tokens) - 1) // self.bs):  # the last token is always left to compute
                block = self.by_prefix.get(tuple(tokens[:(i + 1) * self.bs]))
                if block is None:
                    break
                out.append(block)
        return out

    def can_allocate(self, tokens: list[int]) -> bool:
        hits = self.hits(tokens)
        cost = self.need(len(tokens)) - len(hits) + sum(self.ref[b] == 0 for b in hits)
        return len(self.free_queue) >= cost  # the engine's pool keeps no watermark

    def allocate(self, req: MReq) -> None:
        hits = self.hits(req.tokens)
        for b in hits:  # hits leave the free queue before any fresh block is taken
            if self.ref[b] == 0:
                self.free_queue.remove(b)
            self.ref[b] += 1
        req.table = hits + [self.take() for _ in range(self.need(len(req.tokens)) - len(hits))]
        req.num_hashes = len(hits)
        req.computed = req.cached = len(hits) * self.bs

    def cache_full_blocks(self, req: MReq) -> None:
        if not self.caching:
            return
        for i in range(req.num_hashes, req.computed // self.bs):
            prefix = tuple(req.tokens[:(i + 1) * self.bs])
            req.num_hashes += 1
            if prefix not in self.by_prefix:
                self.by_prefix[prefix] = req.table[i]
                self.prefix_of[req.table[i]] = prefix

    def can_append(self, req: MReq) -> bool:
        grows = len(req.table) * self.bs < len(req.tokens)
        shared = not grows and self.ref[req.table[(len(req.tokens) - 1) // self.bs]] > 1
        return not (grows or shared) or len(self.free_queue) > 0

    def append_slot(self, req: MReq) -> None:
        if len(req.table) * self.bs < len(req.tokens):
            req.table.append(self.take())
            return
        i = (len(req.tokens) - 1) // self.bs
        if self.ref[req.table[i]] > 1:  # never in this engine (nothing forks); kept for the rule's sake
            self.ref[req.table[i]] -= 1
            req.table[i] = self.take()

    def free(self, req: MReq) -> None:
        for b in reversed(req.table):  # tail first: a cached chain loses its tail before its head
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.free_queue.append(b)
        req.table, req.num_hashes = [], 0


@dataclass
class EngineCfg:
    max_num_seqs: int  # already min(max_num_seqs, max_num_batched_tokens), as the engine passes it
    budget: int
    policy: str
    chunked: bool


class EngineModel:
    """The engine: FCFS continuous batching with recompute preemption, step by step."""

    def __init__(self, cfg: EngineCfg, pool: PoolModel) -> None:
        self.cfg, self.pool = cfg, pool
        self.waiting: list[MReq] = []
        self.running: list[MReq] = []
        self.reqs: dict[int, MReq] = {}
        self.num_preemptions = 0

    def add(self, req: MReq) -> None:
        self.waiting.append(req)
        self.reqs[req.seq_id] = req

    def _preempt(self, req: MReq, plan: dict) -> None:
        self.pool.free(req)
        self.running.remove(req)
        req.computed = req.cached = 0
        req.status = "WAITING"
        self.waiting.insert(0, req)
        plan["preempted"].append(req.seq_id)

    def _entry(self, req: MReq, n: int, plan: dict) -> None:
        plan["entries"].append([req.seq_id, n, req.computed + n == len(req.tokens)])
        plan["left"] -= n

    def _decodes(self, plan: dict) -> None:
        for req in list(self.running):
            if req.status != "RUNNING" or req.is_prefill:
                continue
            if plan["left"] == 0:
                break
            while not self.pool.can_append(req):  # preempt the newest until the slot fits
                victim = self.running[-1]
                self._preempt(victim, plan)
                if victim is req:
                    break
            if req.status == "RUNNING":
                self.pool.append_slot(req)
                self._entry(req, 1, plan)

    def _prefills(self, plan: dict) -> None:
        for req in self.running:
            if plan["left"] == 0:
                return
            if req.is_prefill:
                self._entry(req, min(len(req.tokens) - req.computed, plan["left"]), plan)
        if plan["preempted"]:
            return
        while self.waiting and plan["left"] > 0 and len(self.running) < self.cfg.max_num_seqs:
            req = self.waiting[0]
            if not self.pool.can_allocate(req.tokens):
                return
            if not self.cfg.chunked and len(req.tokens) > plan["left"]:  # all its tokens, not the prompt
                return
            self.waiting.pop(0)
            self.pool.allocate(req)
            req.status = "RUNNING"
            self.running.append(req)
            self._entry(req, min(len(req.tokens) - req.computed, plan["left"]), plan)

    def schedule(self) -> dict:
        """The step's plan: entries [seq_id, num_tokens, samples] and the preempted seq_ids."""
        plan: dict = {"left": self.cfg.budget, "entries": [], "preempted": []}
        if self.cfg.policy == "decode_first":
            self._decodes(plan)
            self._prefills(plan)
        else:
            self._prefills(plan)
            if not plan["entries"]:
                self._decodes(plan)
        return plan

    def update(self, plan: dict, tokens: dict[int, int], op: int) -> list[MReq]:
        """Applies the step (run as operation `op`) with the sampled tokens; returns the finished."""
        finished = []
        for seq_id, n, samples in plan["entries"]:
            req = self.reqs[seq_id]
            req.first_scheduled = op if req.first_scheduled is None else req.first_scheduled
            req.computed += n
            self.pool.cache_full_blocks(req)
            if not samples:
                continue
            req.tokens.append(tokens[seq_id])
            req.first_token = op if req.first_token is None else req.first_token
            if len(req.completion) >= req.max_tokens or tokens[seq_id] in req.stop:
                req.status, req.finished = "FINISHED", op
                self.pool.free(req)
                self.running.remove(req)
                finished.append(req)
        self.num_preemptions += len(plan["preempted"])
        return finished

    def live(self) -> list[MReq]:
        return [*self.running, *self.waiting]
