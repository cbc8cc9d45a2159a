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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, settings

from kvcache import Batch, BlockManager, Scheduler, SchedulerConfig, Sequence, SequenceStatus

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


@dataclass
class DriveLog:
    batches: list[Batch] = field(default_factory=list)
    first_seen: list[int] = field(default_factory=list)  # seq ids in order of first scheduling
    samples: Counter = field(default_factory=Counter)  # seq id -> sampling entries


def check_pool(bm: BlockManager, live: list[Sequence]) -> None:
    """Reference counts equal table memberships; free queue = blocks with no reference."""
    refs: Counter = Counter()
    for seq in live:
        assert len(set(seq.block_table)) == len(seq.block_table), f"seq {seq.seq_id} holds a block twice"
        refs.update(seq.block_table)
    for block in bm.blocks:
        assert block.ref_count == refs[block.block_id], (
            f"block {block.block_id}: ref_count {block.ref_count} but {refs[block.block_id]} live tables hold it"
        )
    free = {b.block_id for b in bm.blocks if b.ref_count == 0}
    assert set(bm.free_queue) == free and len(bm.free_queue) == len(free)
    assert bm.num_free_blocks == len(free)
    for h, block_id in bm.cached.items():
        assert bm.blocks[block_id].hash == h, f"cached hash maps to block {block_id} holding another hash"


def check_batch(sched: Scheduler, batch: Batch, kv: dict[int, int]) -> None:
    """Budget, batch size, slot mapping, exclusive writes, and the shadow-KV reads (then writes)."""
    cfg, bm, bs = sched.config, sched.block_manager, sched.block_manager.block_size
    assert batch.num_tokens <= cfg.max_num_batched_tokens, "token budget exceeded"
    assert batch.num_seqs <= cfg.max_num_seqs and len(sched.running) <= cfg.max_num_seqs
    ids = [e.seq_id for e in batch.entries]
    assert len(set(ids)) == len(ids), "a sequence appears twice in one step"
    slots = [s for e in batch.entries for s in e.slot_mapping]
    assert len(set(slots)) == len(slots), "two tokens of one step write the same KV slot"
    writes: dict[int, int] = {}
    for e in batch.entries:
        seq = sched.live[e.seq_id]
        assert seq.status == SequenceStatus.RUNNING and e.num_tokens >= 1
        assert e.start_pos == seq.num_computed_tokens and e.block_table == tuple(seq.block_table)
        assert e.token_ids == tuple(seq.token_ids[e.start_pos : e.start_pos + e.num_tokens])
        assert e.samples == (e.start_pos + e.num_tokens == seq.num_tokens)
        table = seq.block_table
        want = tuple(table[p // bs] * bs + p % bs for p in range(e.start_pos, e.start_pos + e.num_tokens))
        assert e.slot_mapping == want, f"seq {e.seq_id}: slot mapping {e.slot_mapping} != {want}"
        for p in range(e.start_pos, e.start_pos + e.num_tokens):
            assert bm.blocks[table[p // bs]].ref_count == 1, f"seq {e.seq_id} writes into a shared block"
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
    hook: Callable[[Scheduler, Batch, dict[int, bool]], None] | None = None,
) -> DriveLog:
    """Run until every sequence finishes, adding seqs[i] at step arrival_steps[i] (FCFS among
    equal steps in list order), sampling `sampled_token`, checking invariants after every step.
    hook(sched, batch, before) runs after each schedule(); before maps the running sequences'
    ids to their is_prefill as they were just before that schedule() call."""
    order = sorted(range(len(seqs)), key=lambda i: arrival_steps[i])
    log, kv, pending, step = DriveLog(), {}, 0, 0
    while pending < len(order) or sched.has_unfinished():
        assert step < max_steps, f"not done after {max_steps} steps: a request starves or the scheduler livelocks"
        while pending < len(order) and arrival_steps[order[pending]] <= step:
            sched.add(seqs[order[pending]])
            pending += 1
        before = {seq.seq_id: seq.is_prefill for seq in sched.running}
        batch = sched.schedule()
        if hook is not None:
            hook(sched, batch, before)
        check_batch(sched, batch, kv)
        check_pool(sched.block_manager, list(sched.live.values()))
        for e in batch.entries:
            if e.seq_id not in log.first_seen:
                log.first_seen.append(e.seq_id)
        tokens = {}
        for e in batch.entries:
            if e.samples:
                seq = sched.live[e.seq_id]
                tokens[e.seq_id] = sampled_token(e.seq_id, seq.num_completion_tokens)
                log.samples[e.seq_id] += 1
        sched.update(batch, tokens)
        check_pool(sched.block_manager, list(sched.live.values()))
        log.batches.append(batch)
        step += 1
    bm = sched.block_manager
    assert bm.num_free_blocks == bm.num_blocks, "blocks leaked: the pool is not whole after every request finished"
    for seq in seqs:
        assert seq.status == SequenceStatus.FINISHED
        assert seq.completion_token_ids == [sampled_token(seq.seq_id, k) for k in range(seq.max_tokens)]
        assert log.samples[seq.seq_id] == seq.max_tokens, f"seq {seq.seq_id} sampled more often than it kept"
    arrival_rank = {seqs[i].seq_id: r for r, i in enumerate(order)}
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
