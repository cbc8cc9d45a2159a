"""BlockManager: allocation, reference counts, prefix caching, LRU eviction, watermark, fork/COW."""

from __future__ import annotations

import pytest
from autograder.testing import in_worker
from hypothesis import example, given
from hypothesis import strategies as st

from conftest import PROPERTY_SETTINGS, Pool, check_pool, check_pool_state, pool_state
from kvcache import BlockManager, Sequence, hash_block_tokens


def computed(bm: BlockManager, seq: Sequence) -> Sequence:
    """Pretend the model computed every token of seq, and register its full blocks."""
    seq.num_computed_tokens = seq.num_tokens
    bm.cache_full_blocks(seq)
    return seq


@pytest.mark.points(1)
def test_block_hash_is_chained_and_deterministic():
    h1 = hash_block_tokens(None, [1, 2, 3, 4])
    assert h1 == hash_block_tokens(None, (1, 2, 3, 4))  # same tokens, same hash, any container
    assert h1 != hash_block_tokens(None, [1, 2, 3, 5])
    h2 = hash_block_tokens(h1, [5, 6, 7, 8])
    # the same tokens after another parent name another prefix
    assert h2 != hash_block_tokens(hash_block_tokens(None, [9, 9, 9, 9]), [5, 6, 7, 8])
    assert h2 != hash_block_tokens(None, [5, 6, 7, 8])


@pytest.mark.points(2)
def test_allocate_takes_fresh_blocks_in_order_and_free_returns_them():
    bm = BlockManager(8, 4)
    a = Sequence(0, list(range(1, 11)), max_tokens=4)  # 10 tokens -> 3 blocks
    assert bm.can_allocate(a)
    bm.allocate(a)
    assert a.block_table == [0, 1, 2]
    assert a.num_computed_tokens == a.num_cached_tokens == 0
    assert bm.num_free_blocks == 5 and bm.num_used_blocks == 3
    bm.free(a)
    assert a.block_table == [] and bm.num_free_blocks == 8
    # freed blocks go to the back of the queue, last table entry first
    assert list(bm.free_queue) == [3, 4, 5, 6, 7, 2, 1, 0]


@pytest.mark.points(2)
def test_prefix_hit_reuses_full_computed_blocks_only():
    bm = BlockManager(16, 4)
    a = Sequence(0, list(range(1, 11)), max_tokens=4)  # blocks [1..4] [5..8] [9, 10]
    bm.allocate(a)
    assert bm.num_cached_blocks == 0  # nothing is computed yet: nothing to hit
    computed(bm, a)
    assert bm.num_cached_blocks == 2  # the partial third block is not registered
    assert len(a.block_hashes) == 2
    b = Sequence(1, list(range(1, 11)) + [77], max_tokens=4)
    bm.allocate(b)
    assert b.block_table[:2] == a.block_table[:2] and b.block_table[2] not in a.block_table
    assert b.num_cached_tokens == b.num_computed_tokens == 8
    assert [bm.blocks[i].ref_count for i in a.block_table[:2]] == [2, 2]
    assert bm.stats.query_tokens == 10 + 11 and bm.stats.hit_tokens == 8
    check_pool(bm, [a, b])


@pytest.mark.points(1)
def test_different_first_block_breaks_the_chain():
    bm = BlockManager(16, 4)
    computed(bm, _allocated(bm, Sequence(0, [1, 2, 3, 4, 5, 6, 7, 8, 9], 1)))
    c = Sequence(1, [0, 2, 3, 4, 5, 6, 7, 8, 9], 1)  # second block equal, first differs
    bm.allocate(c)
    assert c.num_cached_tokens == 0


@pytest.mark.points(2)
def test_a_fully_cached_prompt_still_leaves_one_token_to_compute():
    bm = BlockManager(16, 4)
    computed(bm, _allocated(bm, Sequence(0, list(range(1, 9)), 1)))  # 2 full blocks cached
    b = Sequence(1, list(range(1, 9)), 1)
    bm.allocate(b)
    assert b.num_cached_tokens == 4  # the last block is recomputed, so its last token has logits
    assert b.num_computed_tokens < b.num_tokens


@pytest.mark.points(2)
def test_freed_cached_blocks_are_hit_until_evicted_in_lru_order():
    bm = BlockManager(4, 2)
    a = computed(bm, _allocated(bm, Sequence(0, [1, 2, 3, 4, 5], 1)))  # blocks 0,1 full, 2 partial
    bm.free(a)
    assert bm.num_free_blocks == 4 and bm.num_cached_blocks == 2
    b = Sequence(1, [1, 2, 3, 4, 9], 1)
    assert bm.can_allocate(b)
    bm.allocate(b)
    assert b.block_table[:2] == [0, 1] and b.num_cached_tokens == 4
    bm.free(b)
    # free queue, least recently freed first: [2, 3, 1, 0] (b's table freed tail first)
    c = _allocated(bm, Sequence(2, [50, 51, 52, 53], 1))  # takes blocks 2 and 3: nothing cached lost
    assert c.block_table == [2, 3] and bm.num_cached_blocks == 2
    bm.free(c)
    d = _allocated(bm, Sequence(3, [60], 1))  # takes block 1: the chain loses its tail, not its head
    assert d.block_table == [1] and bm.num_cached_blocks == 1
    e = Sequence(4, [1, 2, 3, 4, 9], 1)
    bm.allocate(e)
    assert e.num_cached_tokens == 2 and e.block_table[0] == 0


@pytest.mark.points(2)
def test_can_allocate_counts_revived_hits_and_keeps_the_watermark():
    bm = BlockManager(10, 4, watermark=0.2)  # keeps 2 blocks free at admission
    assert bm.watermark_blocks == 2
    assert bm.can_allocate(Sequence(0, list(range(32)), 1))  # 8 blocks: 10 - 8 = 2 left
    assert not bm.can_allocate(Sequence(1, list(range(33)), 1))  # 9 blocks
    pool = BlockManager(4, 4)
    a = computed(pool, _allocated(pool, Sequence(0, list(range(1, 10)), 1)))  # 3 blocks, 2 cached
    b = Sequence(1, list(range(1, 10)), 1)
    assert pool.can_allocate(b)  # 2 hits in use cost nothing, 1 fresh block fits
    pool.free(a)
    big = _allocated(pool, Sequence(2, [90], 1))  # holds one block; 3 free, 2 of them cached
    assert pool.can_allocate(b)  # revives 2 + 1 fresh = 3 <= 3
    assert not pool.can_allocate(Sequence(3, list(range(1, 10)) + [5, 6, 7, 8], 1))  # 4 needed
    pool.free(big)


@pytest.mark.points(2)
def test_fork_shares_blocks_and_copy_on_write_isolates_the_writer():
    bm = BlockManager(8, 4)
    parent = computed(bm, _allocated(bm, Sequence(0, [1, 2, 3, 4, 5, 6], 4)))  # table [0, 1]
    parent.append_token(7)
    child = Sequence(1, [1, 2, 3, 4, 5, 6], 4)
    child.append_token(7)
    bm.fork(parent, child)
    assert child.block_table == parent.block_table == [0, 1]
    assert child.num_computed_tokens == 6
    assert [bm.blocks[i].ref_count for i in (0, 1)] == [2, 2]
    assert bm.can_append(parent)
    assert bm.append_slot(parent) == (1, 2)  # position 6 is in shared block 1: copy it to block 2
    assert parent.block_table == [0, 2] and bm.blocks[1].ref_count == 1
    assert bm.append_slot(child) is None  # block 1 is the child's alone now
    check_pool(bm, [parent, child])
    bm.free(parent)
    bm.free(child)
    assert bm.num_free_blocks == 8


@pytest.mark.points(1)
def test_append_slot_adds_a_block_when_the_last_one_is_full():
    bm = BlockManager(3, 2)
    seq = computed(bm, _allocated(bm, Sequence(0, [1, 2], 3)))
    seq.append_token(3)  # position 2 needs a second block
    assert bm.can_append(seq)
    assert bm.append_slot(seq) is None and seq.block_table == [0, 1]
    seq.num_computed_tokens = 3
    seq.append_token(4)  # position 3 fits block 1
    assert bm.append_slot(seq) is None and seq.block_table == [0, 1]
    other = _allocated(bm, Sequence(1, [9], 1))  # takes the last block
    seq.num_computed_tokens = 4
    seq.append_token(5)
    assert not bm.can_append(seq)
    bm.free(other)
    assert bm.can_append(seq)


_ops = st.lists(
    st.tuples(st.sampled_from(["new", "compute", "append", "fork", "free"]), st.integers(0, 7), st.integers(1, 12)),
    max_size=40,
)


@in_worker
def record_ops(ops, block_size, caching):
    """The operation sequence, run in the worker (one request, not hundreds). After each op it
    records the pool and the live tables, and after an append the ref_count of the block written
    (None if no append happened); then the pool once every live sequence is freed."""
    bm = BlockManager(12, block_size, enable_prefix_caching=caching)
    live: list[Sequence] = []
    next_id, records = 0, []
    for op, pick, length in ops:
        written = None
        if op == "new":
            seq = Sequence(next_id, [1 + (i * 7 + pick) % 5 for i in range(length)], 8)
            next_id += 1
            if bm.can_allocate(seq):
                bm.allocate(seq)
                live.append(seq)
        elif live:
            seq = live[pick % len(live)]
            if op == "compute":
                computed(bm, seq)
            elif op == "append" and seq.num_computed_tokens == seq.num_tokens:
                seq.append_token(900 + pick)
                if bm.can_append(seq):
                    bm.append_slot(seq)
                    written = (bm.blocks[seq.block_table[(seq.num_tokens - 1) // block_size]].ref_count,)
                else:
                    seq.token_ids.pop()
            elif op == "fork":
                child = Sequence(next_id, seq.prompt_token_ids, 8)
                child.token_ids = list(seq.token_ids)
                next_id += 1
                bm.fork(seq, child)
                live.append(child)
            elif op == "free":
                bm.free(seq)
                live.remove(seq)
        records.append((pool_state(bm, live), written))
    for seq in live:
        bm.free(seq)
    return records, pool_state(bm, [])


@pytest.mark.points(3)
@PROPERTY_SETTINGS
@given(ops=_ops, block_size=st.sampled_from([1, 2, 4]), caching=st.booleans())
# a fork, then an append into the shared partial block: the copy-on-write case, always tried
@example(ops=[("new", 0, 3), ("compute", 0, 1), ("fork", 0, 1), ("append", 0, 1)], block_size=4, caching=False)
def test_reference_counts_match_live_tables_under_any_operation_sequence(ops, block_size, caching):
    """No block sits in two live tables unless its ref_count says so; free blocks are exactly the
    unreferenced ones; freeing everything restores the pool."""
    records, final = record_ops(ops, block_size, caching)
    for pool, written in records:
        assert written is None or written == (1,), "append_slot left the written block shared"
        pool = Pool(*pool)
        check_pool_state(pool)
        assert pool.num_free_blocks + sum(ref_count > 0 for ref_count in pool.ref_counts) == pool.num_blocks
    final = Pool(*final)
    assert final.num_free_blocks == final.num_blocks
    assert all(ref_count == 0 for ref_count in final.ref_counts)


def _allocated(bm: BlockManager, seq: Sequence) -> Sequence:
    bm.allocate(seq)
    return seq
