"""Model-based test of the Scheduler over its BlockManager: random arrivals, steps (some sampling a
stop token) and forks (parallel sampling: a decoding sequence's blocks shared with a new running
sequence) on small, nearly full pools, with chunked prefill on and off and both policies, run on the
package and on kv_model.SchedulerModel (the handout's rules). After every step the batch is compared
entry by entry (sequence, start, length, prefill or not, sampling or not, block table, slot mapping),
with the preempted sequences, the copy-on-write copies and the finished ones; after every operation
the running and waiting queues, the pool (free queue, reference counts, cached blocks, hit
statistics) and each live sequence (table, hashes, computed and cached counts, status, length,
preemptions). A failure shrinks to a short operation sequence that Hypothesis prints.

Budget: a fixed seed; AUTOGRADER_HYPOTHESIS_PROFILE=thorough runs ten times as many examples.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test
from kvcache import BlockManager, Scheduler, SchedulerConfig, Sequence, SequenceStatus

from autograder.testing import in_the_worker, in_worker

if not in_the_worker():  # the model runs in the judge only
    from kv_model import BlockModel, MSeq, SchedConfig, SchedulerModel, run_trace, sampled

SCALE = 10 if os.environ.get("AUTOGRADER_HYPOTHESIS_PROFILE") == "thorough" else 1
MODEL_SETTINGS = settings(max_examples=40 * SCALE, stateful_step_count=30, derandomize=True, database=None,
                          deadline=None, phases=[Phase.explicit, Phase.generate, Phase.shrink],
                          report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
PREFIXES = ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], [1, 2, 3, 4, 5, 6, 20, 21, 22, 23, 24], [30, 31, 32, 33, 1, 2, 3])
# arrivals: (prefix, prompt length, shortfall): max_tokens = max_model_len - prompt length - shortfall // 3
ARRIVALS = st.lists(st.tuples(st.sampled_from(PREFIXES), st.integers(1, 11), st.integers(1, 11)),
                    min_size=1, max_size=3)
STOP = 999  # a stop token: never a prompt token (< 100) nor a sampled one (>= 1000)
# what _observed records, named for the failure messages
QUEUE_NAMES = ["running ids (in order)", "waiting ids (in order)", "block pool",
               "live [seq_id, status, num_tokens, num_preemptions]"]
POOL_NAMES = ["free queue (in order)", "ref counts", "num_cached_blocks", "stats [queries, tokens, hits]",
              "live [seq_id, block_table, len(block_hashes), num_computed_tokens, num_cached_tokens]"]


# ---- in the worker: apply one operation, record what the tests compare -------------------------
def _observed(sched: Scheduler) -> list:
    bm, s = sched.block_manager, sched.block_manager.stats
    seqs = sorted(sched.live.values(), key=lambda q: q.seq_id)
    pool = [list(bm.free_queue), [b.ref_count for b in bm.blocks], bm.num_cached_blocks,
            [s.num_queries, s.query_tokens, s.hit_tokens],
            [[q.seq_id, list(q.block_table), len(q.block_hashes), q.num_computed_tokens, q.num_cached_tokens]
             for q in seqs]]
    return [[q.seq_id for q in sched.running], [q.seq_id for q in sched.waiting], pool,
            [[q.seq_id, q.status.name, q.num_tokens, q.num_preemptions] for q in seqs]]


@in_worker
def sched_op(sched: Scheduler, op: str, arg: list) -> list:
    """[answer, observed]. step: schedule(), and update() with the judge's tokens only if the batch
    is the expected one (else the judge reports the batch)."""
    answer = None
    if op == "add":  # arg: [seq_id, prompt, max_tokens]
        sched.add(Sequence(arg[0], arg[1], arg[2], stop_token_ids=(STOP,)))
    elif op == "step":  # arg: [expected batch, tokens as [seq_id, token] pairs]
        b = sched.schedule()
        got = [b.step, [[e.seq_id, e.start_pos, e.num_tokens, e.is_prefill, e.samples, list(e.block_table),
                         list(e.slot_mapping)] for e in b.entries],
               list(b.preempted), [list(c) for c in b.block_copies]]
        answer = [got, None]
        if got == arg[0]:
            answer[1] = sorted(q.seq_id for q in sched.update(b, dict(arg[1])))
    elif op == "preempt":  # arg: [seq_id]: as the scheduler preempts a victim (recompute later)
        sched._preempt(sched.live[arg[0]])
    elif op == "fork":  # arg: [parent id, child id]: parallel sampling, as an engine would add it
        parent = sched.live[arg[0]]
        child = Sequence(arg[1], parent.prompt_token_ids, parent.max_tokens, stop_token_ids=(STOP,))
        child.token_ids = list(parent.token_ids)
        sched.block_manager.fork(parent, child)
        child.status = SequenceStatus.RUNNING
        sched.running.append(child)
        sched.live[child.seq_id] = child
    return [answer, _observed(sched)]


# ---- in the judge: the machine ---------------------------------------------------------------
def _describe(entries: list) -> list:
    keys = ("seq", "start", "n", "prefill", "samples", "table", "slots")
    return [dict(zip(keys, e)) for e in entries]


class SchedulerMachine(RuleBasedStateMachine):
    """Drives the package's Scheduler and the model with the same operations."""

    @initialize(block_size=st.sampled_from([1, 2, 4]), max_model_len=st.integers(4, 12), extra=st.integers(0, 4),
                watermark=st.sampled_from([0.0, 0.0, 0.2]), caching=st.booleans(), max_num_seqs=st.integers(2, 4),
                chunked=st.booleans(), spare=st.integers(0, 8),
                policy=st.sampled_from(["decode_first", "prefill_first"]), arrivals=ARRIVALS)
    def setup(self, block_size, max_model_len, extra, watermark, caching, max_num_seqs, chunked, spare, policy,
              arrivals):
        need = -(-max_model_len // block_size)
        num_blocks = need + extra * need // 2  # room for one to three longest sequences
        while need > num_blocks - int(watermark * num_blocks):
            num_blocks += 1
        budget = max(max_num_seqs, 2) + spare if chunked else max(max_model_len, max_num_seqs) + spare // 4
        self.cfg = {"max_num_seqs": max_num_seqs, "max_num_batched_tokens": budget, "max_model_len": max_model_len,
                        "policy": policy, "enable_chunked_prefill": chunked}
        self.sched = Scheduler(SchedulerConfig(**self.cfg),
                               BlockManager(num_blocks, block_size, watermark=watermark, enable_prefix_caching=caching))
        self.model = SchedulerModel(SchedConfig(max_num_seqs, budget, max_model_len, policy, chunked),
                                    BlockModel(num_blocks, block_size, watermark, caching))
        self.setup_text = (f"{num_blocks} blocks of {block_size}, watermark {watermark}, prefix caching {caching}, "
                           f"{self.cfg}")
        self.next_id = 0
        self.add(arrivals)

    def _compare(self, what: str, observed: list) -> None:
        for name, got, exp in zip(QUEUE_NAMES, observed, self.model.observed()):
            if name == "block pool":
                for pool_name, g, e in zip(POOL_NAMES, got, exp):
                    assert g == e, f"after {what} ({self.setup_text}): {pool_name} is {g}, the handout's rules give {e}"
            else:
                assert got == exp, f"after {what} ({self.setup_text}): {name} is {got}, the handout's rules give {exp}"

    @rule(arrivals=ARRIVALS)
    def add(self, arrivals):
        for prefix, length, out in arrivals:
            self._add(prefix, length, out)

    def _add(self, prefix: list[int], length: int, out: int) -> None:
        mml = self.model.cfg.max_model_len
        tokens = prefix[: min(length, mml - 1)]
        max_tokens = max(1, mml - len(tokens) - out // 3)  # prompt + output <= max_model_len, often equal
        seq = MSeq(self.next_id, list(tokens), len(tokens), max_tokens, stop=STOP)
        self.model.add(seq)
        _, observed = sched_op(self.sched, "add", [self.next_id, tokens, max_tokens])
        self.next_id += 1
        self._compare(f"add(seq {seq.seq_id}: prompt {tokens}, max_tokens {max_tokens})", observed)

    @rule(rounds=st.integers(1, 4), stop=st.sampled_from([False, False, True]))
    def step(self, rounds, stop):
        for _ in range(rounds):
            self._step(stop)

    def _step(self, stop: bool) -> None:
        batch = self.model.schedule()
        sampling = [e[0] for e in batch[1] if e[4]]
        stop_ids = set(sampling[:1]) if stop else set()
        tokens = [[s, STOP if s in stop_ids else sampled(s, self.model.live[s].completion)] for s in sampling]
        want_finished = sorted(self.model.update(batch[1], stop_ids))
        (got, finished), observed = sched_op(self.sched, "step", [batch, tokens])
        what = f"schedule() of step {batch[0]} ({self.setup_text})"
        assert got[0] == batch[0], f"{what}: Batch.step is {got[0]}, expected {batch[0]}"
        assert got[1] == batch[1], (f"{what}: entries {_describe(got[1])}, the handout's rules give "
                                    f"{_describe(batch[1])}")
        assert got[2] == batch[2], f"{what}: preempted {got[2]}, the handout's rules give {batch[2]}"
        assert got[3] == batch[3], f"{what}: block_copies {got[3]}, the handout's rules give {batch[3]}"
        assert finished == want_finished, f"update() of step {batch[0]} finished {finished}, expected {want_finished}"
        self._compare(f"step {batch[0]} (schedule, then update with tokens {tokens})", observed)

    @precondition(lambda self: self.model.running)
    @rule(i=st.integers(0, 20))
    def preempt(self, i):
        victim = self.model.running[i % len(self.model.running)]
        self.model._preempt(victim)
        _, observed = sched_op(self.sched, "preempt", [victim.seq_id])
        self._compare(f"_preempt(seq {victim.seq_id})", observed)

    @precondition(lambda self: len(self.model.running) < self.model.cfg.max_num_seqs
                  and any(not s.is_prefill for s in self.model.running))
    @rule(i=st.integers(0, 20))
    def fork(self, i):
        decoding = [s for s in self.model.running if not s.is_prefill]
        parent = decoding[i % len(decoding)]
        child = MSeq(self.next_id, list(parent.tokens), parent.num_prompt, parent.max_tokens, stop=STOP,
                     status="RUNNING")
        self.model.pool.fork(parent, child)
        self.model.running.append(child)
        self.model.live[child.seq_id] = child
        _, observed = sched_op(self.sched, "fork", [parent.seq_id, self.next_id])
        self.next_id += 1
        self._compare(f"fork(seq {parent.seq_id} -> seq {child.seq_id}) into running", observed)


P0 = PREFIXES[0]
# Rare in a small random budget, so always replayed.
PINNED = {
    # chunking off: a re-admitted sequence needs all its tokens (not just its prompt) in the budget
    # left after two decodes
    "readmission_without_chunking_needs_all_its_tokens": [
        ("setup", {"block_size": 1, "max_model_len": 6, "extra": 4, "watermark": 0.0, "caching": False,
                   "max_num_seqs": 3, "chunked": False, "spare": 0, "policy": "decode_first",
                   "arrivals": [(P0, 1, 0)] * 3}),
        ("step", {"rounds": 4, "stop": False}), ("preempt", {"i": 0}), ("step", {"rounds": 2, "stop": False})],
    # a decode into a shared (forked) last block needs a free block to copy into: none left, so the
    # newest sequence is preempted
    "fork_on_a_full_pool_preempts_for_its_copy": [
        ("setup", {"block_size": 2, "max_model_len": 6, "extra": 0, "watermark": 0.0, "caching": False,
                   "max_num_seqs": 3, "chunked": True, "spare": 0, "policy": "decode_first",
                   "arrivals": [(P0, 2, 0)]}),
        ("step", {"rounds": 2, "stop": False}), ("fork", {"i": 0}), ("fork", {"i": 0}),
        ("step", {"rounds": 3, "stop": False})],
    # a preempted sequence keeps no prefix-cache hit count: it recomputes (and looks up) again
    "preemption_resets_the_cached_count": [
        ("setup", {"block_size": 1, "max_model_len": 4, "extra": 0, "watermark": 0.0, "caching": True,
                   "max_num_seqs": 2, "chunked": False, "spare": 0, "policy": "decode_first",
                   "arrivals": [(P0, 1, 1)]}),
        ("add", {"arrivals": [(P0, 1, 1), (P0, 2, 1)]}), ("step", {"rounds": 2, "stop": True}),
        ("preempt", {"i": 0})],
}


@pytest.mark.points(2)
@pytest.mark.parametrize("trace", PINNED.values(), ids=PINNED.keys())
def test_scheduler_matches_the_model_on_pinned_traces(trace):
    """The same comparison as below on a fixed operation sequence."""
    run_trace(SchedulerMachine(), trace)


@pytest.mark.points(6)
def test_scheduler_matches_the_model_under_random_workloads():
    """Every batch, preemption, copy and queue equals the model's, step by step, on pools that run
    dry (preemption, re-admission with prefix hits), chunked prefill on and off, both policies."""
    run_state_machine_as_test(SchedulerMachine, settings=MODEL_SETTINGS)
