"""Model-based test of the BlockManager: random allocate / compute / decode / fork / free sequences on
small, nearly full pools, run on the package and on kv_model.BlockModel (the handout's rules), with
every observable compared after every operation: can_allocate and can_append answers, append_slot's
copy-on-write pair, the free queue in order, every reference count, each live table, its hashes and
computed / cached counts, the number of cached blocks and the hit statistics. A failure shrinks to
a short operation sequence (Hypothesis prints it as `state.new(...)`, `state.fork(...)`, ...).

Budget: a fixed seed; AUTOGRADER_HYPOTHESIS_PROFILE=thorough runs ten times as many examples.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test
from kvcache import BlockManager, Sequence

from autograder.testing import in_the_worker, in_worker

if not in_the_worker():  # the model runs in the judge only
    from kv_model import BlockModel, MSeq, run_trace

SCALE = 10 if os.environ.get("AUTOGRADER_HYPOTHESIS_PROFILE") == "thorough" else 1
MODEL_SETTINGS = settings(max_examples=40 * SCALE, stateful_step_count=25, derandomize=True, database=None,
                          deadline=None, phases=[Phase.explicit, Phase.generate, Phase.shrink],
                          report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
PREFIXES = ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 9, 9, 9, 9], [5, 6, 7, 8, 1, 2, 3, 4])


# ---- in the worker: apply one operation, record what the tests compare -------------------------
def _observed(bm: BlockManager, live: list[Sequence]) -> list:
    blocks = bm.blocks
    s = bm.stats
    return [list(bm.free_queue), [b.ref_count for b in blocks], bm.num_cached_blocks,
            [s.num_queries, s.query_tokens, s.hit_tokens],
            [[q.seq_id, list(q.block_table), len(q.block_hashes), q.num_computed_tokens, q.num_cached_tokens]
             for q in live], bm.num_free_blocks]


@in_worker
def bm_op(bm: BlockManager, live: list[Sequence], op: str, i: int, arg: list) -> list:
    """[answer, new Sequence or None, observed]; `live` is the model's order of live sequences."""
    answer, new = None, None
    if op == "new":  # arg: [seq_id, tokens, allocate?]
        new = Sequence(arg[0], arg[1], 4)
        answer = bm.can_allocate(new)
        if arg[2]:
            bm.allocate(new)
            live = live + [new]
    elif op == "compute":  # arg: [tokens to compute]
        seq = live[i]
        seq.num_computed_tokens = min(seq.num_tokens, seq.num_computed_tokens + arg[0])
        bm.cache_full_blocks(seq)
    elif op == "decode":  # arg: [token, the model's can_append]
        seq = live[i]
        seq.append_token(arg[0])
        answer = [bm.can_append(seq), None]
        if answer[0] and arg[1]:  # append_slot only where both agree it fits (else the judge reports can_append)
            copy = bm.append_slot(seq)
            answer[1] = None if copy is None else list(copy)
        else:
            seq.token_ids.pop()
    elif op == "fork":  # arg: [child id]
        new = Sequence(arg[0], live[i].prompt_token_ids, 4)
        new.token_ids = list(live[i].token_ids)
        bm.fork(live[i], new)
        live = live + [new]
    elif op == "free":
        bm.free(live[i])
        live = live[:i] + live[i + 1 :]
    return [answer, new, _observed(bm, live)]


# ---- in the judge: the machine ---------------------------------------------------------------
class BlockManagerMachine(RuleBasedStateMachine):
    """Drives the package's BlockManager and the model with the same operations."""

    @initialize(num_blocks=st.integers(3, 9), block_size=st.sampled_from([1, 2, 4]),
                watermark=st.sampled_from([0.0, 0.0, 0.25]), caching=st.booleans())
    def setup(self, num_blocks, block_size, watermark, caching):
        self.bm = BlockManager(num_blocks, block_size, watermark=watermark, enable_prefix_caching=caching)
        self.model = BlockModel(num_blocks, block_size, watermark, caching)
        self.live: list = []  # the package's Sequence objects, in the model's order
        self.mlive: list[MSeq] = []
        self.next_id = 0

    def _apply(self, op: str, i: int, arg: list):
        answer, new, observed = bm_op(self.bm, self.live, op, i, arg)
        self.observed = observed
        return answer, new

    def _compare(self, what: str) -> None:
        *pool, num_free = self.observed
        want = self.model.observed(self.mlive)
        names = ["free queue (in order)", "ref counts", "num_cached_blocks", "stats [queries, tokens, hits]",
                 "live [seq_id, block_table, len(block_hashes), num_computed_tokens, num_cached_tokens]"]
        for name, got, exp in zip(names, pool, want):
            assert got == exp, f"after {what}: {name} is {got}, the handout's rules give {exp}"
        assert num_free == len(want[0]), f"after {what}: num_free_blocks {num_free} != {len(want[0])} free blocks"

    @rule(prefix=st.sampled_from(PREFIXES), length=st.integers(1, 8), tail=st.integers(0, 3))
    def new(self, prefix, length, tail):
        tokens = prefix[:length] + [50 + self.next_id] * tail
        seq = MSeq(self.next_id, tokens, len(tokens), 4)
        fits = self.model.fits(tokens)
        want = self.model.can_allocate(tokens)
        answer, handle = self._apply("new", 0, [self.next_id, tokens, fits])
        self.next_id += 1
        assert answer == want, f"can_allocate({tokens}) is {answer}, the handout's rules give {want}"
        if fits:
            self.model.allocate(seq)
            self.mlive.append(seq)
            self.live.append(handle)
        self._compare(f"allocate({tokens})")

    @precondition(lambda self: self.mlive)
    @rule(i=st.integers(0, 20), k=st.integers(1, 6))
    def compute(self, i, k):
        i %= len(self.mlive)
        seq = self.mlive[i]
        seq.computed = min(len(seq.tokens), seq.computed + k)
        self.model.cache_full_blocks(seq)
        self._apply("compute", i, [k])
        self._compare(f"computing {k} more tokens of seq {seq.seq_id} and cache_full_blocks")

    @precondition(lambda self: any(s.computed == len(s.tokens) for s in self.mlive))
    @rule(i=st.integers(0, 20))
    def decode(self, i):
        ready = [j for j, s in enumerate(self.mlive) if s.computed == len(s.tokens)]
        i = ready[i % len(ready)]
        seq = self.mlive[i]
        token = 200 + len(seq.tokens)
        seq.tokens.append(token)
        want = [self.model.can_append(seq), None]
        if want[0]:
            copy = self.model.append_slot(seq)
            want[1] = None if copy is None else list(copy)
        else:
            seq.tokens.pop()
        answer, _ = self._apply("decode", i, [token, want[0]])
        assert answer[0] == want[0], (f"can_append(seq {seq.seq_id}) is {answer[0]}, the handout's rules give "
                                      f"{want[0]} (a shared last block needs a free block to copy into)")
        assert answer[1] == want[1], f"append_slot(seq {seq.seq_id}) returned {answer[1]}, expected {want[1]}"
        self._compare(f"a decode step of seq {seq.seq_id}")

    @precondition(lambda self: self.mlive)
    @rule(i=st.integers(0, 20))
    def fork(self, i):
        i %= len(self.mlive)
        parent = self.mlive[i]
        child = MSeq(self.next_id, list(parent.tokens), parent.num_prompt, 4)
        self.model.fork(parent, child)
        _, handle = self._apply("fork", i, [self.next_id])
        self.next_id += 1
        self.mlive.append(child)
        self.live.append(handle)
        self._compare(f"fork(seq {parent.seq_id} -> seq {child.seq_id})")

    @precondition(lambda self: self.mlive)
    @rule(i=st.integers(0, 20))
    def free(self, i):
        i %= len(self.mlive)
        seq = self.mlive.pop(i)
        self.model.free(seq)
        self._apply("free", i, [])
        self.live.pop(i)
        self._compare(f"free(seq {seq.seq_id})")


P0 = PREFIXES[0]
# Always replayed: a decode into a block shared by three forks on a full pool (can_append must say no).
PINNED = {"shared_last_block_on_a_full_pool_cannot_append": [
    ("setup", {"num_blocks": 3, "block_size": 2, "watermark": 0.0, "caching": False}),
    ("new", {"prefix": P0, "length": 1, "tail": 2}), ("fork", {"i": 0}), ("fork", {"i": 0}),
    ("compute", {"i": 0, "k": 3}), ("new", {"prefix": P0, "length": 1, "tail": 0}), ("decode", {"i": 0})]}


@pytest.mark.points(1)
@pytest.mark.parametrize("trace", PINNED.values(), ids=PINNED.keys())
def test_block_manager_matches_the_model_on_pinned_traces(trace):
    """The same comparison as below on a fixed operation sequence."""
    run_trace(BlockManagerMachine(), trace)


@pytest.mark.points(4)
def test_block_manager_matches_the_model_under_random_operations():
    """Every observable of the pool equals the model's after each allocate, compute, decode, fork
    and free, on pools of 3 to 9 blocks (often full), with and without prefix caching."""
    run_state_machine_as_test(BlockManagerMachine, settings=MODEL_SETTINGS)
