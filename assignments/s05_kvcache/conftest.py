"""Shared by tests/ and hidden/: a driver that runs the scheduler step by step and checks, after
every step, the invariants any paged-KV engine must keep.

The driver plays the model with a "shadow KV cache": writing position q of a sequence stores the
identity of the prefix token_ids[: q + 1] in that slot (K/V of a token depend on its whole prefix).
Before a step computes positions [start, start + n) of a sequence, every earlier position must be
found, with the right prefix identity, in the slots its block table names. Prefix-cache hits on a
wrong block, a block evicted or overwritten while in use, or a lost copy-on-write all fail there.
"""

from __future__ import annotations

import random
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, Phase, settings
from kvcache import BlockManager, Scheduler, SchedulerConfig, Sequence

from autograder.testing import in_worker, tolerances

# Reproducible property tests: same examples on every run, no example database on disk. Failing
# examples are shrunk (students get a small counterexample) but not "explained" (slow).
PROPERTY_SETTINGS = settings(
    max_examples=60,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def sampled_token(seq_id: int, k: int) -> int:
    """The token 'sampled' as output number k of a sequence (distinct from prompt ids < 1000)."""
    return 1000 + (seq_id * 7919 + k * 104729) % 50000


def prefix_ids(tokens: list[int]) -> list[int]:
    """ids[q] names the prefix tokens[: q + 1] (a chained hash; collisions are negligible here)."""
    out, h = [], 0
    for t in tokens:
        h = hash((h, t))
        out.append(h)
    return out


class Entry(NamedTuple):  # a BatchEntry as the worker recorded it
    seq_id: int
    start_pos: int
    num_tokens: int
    is_prefill: bool
    samples: bool
    token_ids: tuple[int, ...]
    block_table: tuple[int, ...]
    slot_mapping: tuple[int, ...]


class Step(NamedTuple):  # a Batch as the worker recorded it (its entries as Entry)
    step: int
    entries: tuple[Entry, ...]
    preempted: tuple[int, ...]
    block_copies: tuple[tuple[int, int], ...]
    num_tokens: int
    num_seqs: int


class Config(NamedTuple):  # the limits the checks hold a driven scheduler to
    max_num_batched_tokens: int
    max_num_seqs: int
    block_size: int


class SeqState(NamedTuple):  # what the checks read of a scheduled sequence just after schedule()
    status: str  # the SequenceStatus member's name
    num_computed_tokens: int
    num_tokens: int
    token_ids: list[int]
    block_table: list[int]


class Pool(NamedTuple):  # the block manager at one moment, with the live sequences' tables
    tables: list[list]  # [seq_id, block_table] per live sequence
    block_ids: list[int]  # bm.blocks' fields, in bm.blocks order
    ref_counts: list[int]
    hashes: list[int | None]
    free_queue: list[int]
    num_free_blocks: int
    num_blocks: int
    cached: dict[int, int]  # hash -> block id


# ---- in the worker: run the package and record plain data (only the judge checks it) -----------
# Reading student objects from the judge costs a request per attribute, and a driven workload reads
# hundreds of thousands. So the worker drives and records, one request per workload; every check
# runs in the judge on the records (what the worker computes is the submission's word, never a verdict).
# Records are flat lists: each value is walked on both sides of the wire, a tuple costs more than a list.
def _seq_state(seq: Sequence) -> list:
    return [seq.status.name, seq.num_computed_tokens, seq.num_tokens, list(seq.token_ids), list(seq.block_table)]


def _pool_state(bm: BlockManager, live: list[Sequence]) -> list:
    blocks = bm.blocks
    return [[[seq.seq_id, list(seq.block_table)] for seq in live], [b.block_id for b in blocks],
            [b.ref_count for b in blocks], [b.hash for b in blocks], list(bm.free_queue), bm.num_free_blocks,
            bm.num_blocks, dict(bm.cached.items())]


@in_worker
def pool_state(bm: BlockManager, live: list[Sequence]) -> list:
    return _pool_state(bm, live)


@in_worker
def record_drive(sched: Scheduler, seqs: list[Sequence], arrival_steps: list[int], max_steps: int) -> dict:
    """drive()'s workload, run in the worker. Per step: the running ids with is_prefill just
    before schedule(), the batch, then after schedule() len(running), the scheduled sequences
    and the pool, and the pool after update(). An exception ends the run: its traceback is
    recorded so that the judge checks the steps before it first."""
    order = sorted(range(len(seqs)), key=lambda i: arrival_steps[i])
    steps: list[list] = []
    cfg = sched.config
    out = {"steps": steps, "error": None, "starved": False, "final": None,
           "config": [cfg.max_num_batched_tokens, cfg.max_num_seqs, sched.block_manager.block_size]}
    pending = 0
    try:
        while pending < len(order) or sched.has_unfinished():
            if len(steps) >= max_steps:
                out["starved"] = True
                return out
            while pending < len(order) and arrival_steps[order[pending]] <= len(steps):
                sched.add(seqs[order[pending]])
                pending += 1
            before = [[seq.seq_id, seq.is_prefill] for seq in sched.running]
            b = sched.schedule()
            entries = [[e.seq_id, e.start_pos, e.num_tokens, e.is_prefill, e.samples, e.token_ids, e.block_table,
                        e.slot_mapping] for e in b.entries]
            batch = [b.step, entries, b.preempted, b.block_copies, b.num_tokens, b.num_seqs]
            states = {e.seq_id: _seq_state(sched.live[e.seq_id]) for e in b.entries if e.seq_id in sched.live}
            record = [before, batch, len(sched.running), states,
                      _pool_state(sched.block_manager, list(sched.live.values())), None]
            steps.append(record)
            tokens = {e.seq_id: sampled_token(e.seq_id, sched.live[e.seq_id].num_completion_tokens)
                      for e in b.entries if e.samples}
            sched.update(b, tokens)
            record[-1] = _pool_state(sched.block_manager, list(sched.live.values()))
        bm = sched.block_manager
        out["final"] = [bm.num_free_blocks, bm.num_blocks,
                        [[s.seq_id, s.status.name, s.completion_token_ids, s.max_tokens] for s in seqs]]
    except Exception:  # noqa: BLE001  the judge reports it after checking the steps that ran
        out["error"] = traceback.format_exc(limit=-4)
    return out


# ---- in the judge: the checks, on the records --------------------------------------------------
@dataclass
class DriveLog:
    batches: list[Step] = field(default_factory=list)
    first_seen: list[int] = field(default_factory=list)  # seq ids in order of first scheduling
    samples: Counter = field(default_factory=Counter)  # seq id -> sampling entries


def check_pool(bm: BlockManager, live: list[Sequence]) -> None:
    """check_pool_state on the pool and live tables as they are now (recorded in one request)."""
    check_pool_state(Pool(*pool_state(bm, list(live))))


def check_pool_state(pool: Pool) -> None:
    """Reference counts equal table memberships; free queue = blocks with no reference."""
    refs: Counter = Counter()
    for seq_id, table in pool.tables:
        assert len(set(table)) == len(table), f"seq {seq_id} holds a block twice"
        refs.update(table)
    for block_id, ref_count in zip(pool.block_ids, pool.ref_counts):
        assert ref_count == refs[block_id], f"block {block_id}: ref_count {ref_count} but {refs[block_id]} live tables hold it"
    free = {block_id for block_id, ref_count in zip(pool.block_ids, pool.ref_counts) if ref_count == 0}
    assert set(pool.free_queue) == free and len(pool.free_queue) == len(free)
    assert pool.num_free_blocks == len(free)
    for h, block_id in pool.cached.items():
        assert pool.hashes[block_id] == h, f"cached hash maps to block {block_id} holding another hash"


def check_batch(cfg: Config, batch: Step, running: int, live: dict[int, SeqState], pool: Pool,
                kv: dict[int, int]) -> None:
    """Budget, batch size, slot mapping, exclusive writes, and the shadow-KV reads (then writes)."""
    bs = cfg.block_size
    assert batch.num_tokens <= cfg.max_num_batched_tokens, "token budget exceeded"
    assert sum(e.num_tokens for e in batch.entries) <= cfg.max_num_batched_tokens, "token budget exceeded"
    assert batch.num_seqs <= cfg.max_num_seqs and len(batch.entries) <= cfg.max_num_seqs
    assert running <= cfg.max_num_seqs
    ids = [e.seq_id for e in batch.entries]
    assert len(set(ids)) == len(ids), "a sequence appears twice in one step"
    slots = [s for e in batch.entries for s in e.slot_mapping]
    assert len(set(slots)) == len(slots), "two tokens of one step write the same KV slot"
    writes: dict[int, int] = {}
    for e in batch.entries:
        assert e.seq_id in live, f"seq {e.seq_id} is scheduled but not live"
        seq = live[e.seq_id]
        assert seq.status == "RUNNING" and e.num_tokens >= 1
        assert e.start_pos == seq.num_computed_tokens and e.block_table == tuple(seq.block_table)
        assert e.token_ids == tuple(seq.token_ids[e.start_pos : e.start_pos + e.num_tokens])
        assert e.samples == (e.start_pos + e.num_tokens == seq.num_tokens)
        table = seq.block_table
        want = tuple(table[p // bs] * bs + p % bs for p in range(e.start_pos, e.start_pos + e.num_tokens))
        assert e.slot_mapping == want, f"seq {e.seq_id}: slot mapping {e.slot_mapping} != {want}"
        for p in range(e.start_pos, e.start_pos + e.num_tokens):
            assert pool.ref_counts[table[p // bs]] == 1, f"seq {e.seq_id} writes into a shared block"
        pid = prefix_ids(seq.token_ids)
        for q in range(e.start_pos):
            slot = table[q // bs] * bs + q % bs
            assert kv.get(slot) == pid[q], f"seq {e.seq_id} position {q}: KV missing or wrong in slot {slot}"
        for p, slot in zip(range(e.start_pos, e.start_pos + e.num_tokens), e.slot_mapping):
            writes[slot] = pid[p]
    kv.update(writes)


def drive(
    sched: Scheduler,
    seqs: list[Sequence],
    arrival_steps: list[int],
    *,
    max_steps: int = 5000,
    hook: Callable[[Step, dict[int, bool]], None] | None = None,
) -> DriveLog:
    """Run until every sequence finishes, adding seqs[i] at step arrival_steps[i] (FCFS among
    equal steps in list order), sampling `sampled_token`, checking invariants after every step.
    The worker runs it (record_drive); the checks run here on its records. hook(batch, before)
    runs on each step's Step; before maps the running sequences' ids to their is_prefill as they
    were just before that schedule() call."""
    run = record_drive(sched, seqs, arrival_steps, max_steps)
    cfg = Config(*run["config"])
    order = sorted(range(len(seqs)), key=lambda i: arrival_steps[i])
    log, kv = DriveLog(), {}
    for before, batch, running, live, pool, pool_after in run["steps"]:
        step, entries, *rest = batch
        batch = Step(step, tuple(Entry(*e) for e in entries), *rest)
        if hook is not None:
            hook(batch, dict(before))
        live = {seq_id: SeqState(*state) for seq_id, state in live.items()}
        check_batch(cfg, batch, running, live, Pool(*pool), kv)
        check_pool_state(Pool(*pool))
        for e in batch.entries:
            if e.seq_id not in log.first_seen:
                log.first_seen.append(e.seq_id)
            if e.samples:
                log.samples[e.seq_id] += 1
        if pool_after is not None:
            check_pool_state(Pool(*pool_after))
        log.batches.append(batch)
    if run["error"] is not None:  # raised after the steps above passed their checks
        raise AssertionError(f"the package raised while driven:\n{run['error']}")
    assert not run["starved"], f"not done after {max_steps} steps: a request starves or the scheduler livelocks"
    num_free, num_blocks, finals = run["final"]
    assert num_free == num_blocks, "blocks leaked: the pool is not whole after every request finished"
    for seq_id, status, completion, max_tokens in finals:
        assert status == "FINISHED"
        assert completion == [sampled_token(seq_id, k) for k in range(max_tokens)]
        assert log.samples[seq_id] == max_tokens, f"seq {seq_id} sampled more often than it kept"
    arrival_rank = {finals[i][0]: r for r, i in enumerate(order)}
    ranks = [arrival_rank[s] for s in log.first_seen]
    assert ranks == sorted(ranks), "admission is not first come, first served"
    return log


def random_prompts(rng: random.Random, n: int, max_len: int, num_prefixes: int = 2) -> list[list[int]]:
    """Prompts that often share prefixes: each starts with one of a few base prompts."""
    bases = [[rng.randrange(1, 1000) for _ in range(max_len)] for _ in range(num_prefixes)]
    prompts = []
    for _ in range(n):
        base = rng.choice(bases)
        k = rng.choice([0, rng.randrange(max_len), max_len])  # shared prefix: none, some, or all
        length = rng.randint(1, max_len)
        prompts.append((base[:k] + [rng.randrange(1, 1000) for _ in range(max_len)])[:length])
    return prompts


def make_scheduler(
    *,
    num_blocks: int,
    block_size: int,
    watermark: float = 0.0,
    prefix_caching: bool = True,
    **config,
) -> Scheduler:
    bm = BlockManager(num_blocks, block_size, watermark=watermark, enable_prefix_caching=prefix_caching)
    return Scheduler(SchedulerConfig(**config), bm)


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES
