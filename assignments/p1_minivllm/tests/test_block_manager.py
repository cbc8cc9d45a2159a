"""BlockManager: allocation, growth, freeing, and the prefix cache (no model involved)."""

import pytest

from minivllm import BlockManager, SamplingParams, Sequence

BS = 4  # tokens per block in these tests


def seq_of(seq_id: int, tokens: list[int]) -> Sequence:
    return Sequence(seq_id, tokens, SamplingParams(max_tokens=8), BS)


def compute_all(bm: BlockManager, seq: Sequence) -> None:
    """What the engine does once a sequence's tokens have all been run through the model."""
    seq.num_computed_tokens = seq.num_tokens
    bm.cache_blocks(seq)


@pytest.fixture
def assert_consistent(pool_problems):
    def check(bm: BlockManager, running: list[Sequence]) -> None:
        problems = pool_problems(bm, running)
        assert not problems, problems

    return check


@pytest.mark.points(1)
def test_allocate_gives_each_sequence_its_own_fresh_blocks(assert_consistent):
    bm = BlockManager(num_blocks=8, block_size=BS, enable_prefix_caching=False)
    a, b = seq_of(0, list(range(10))), seq_of(1, list(range(5)))
    bm.allocate(a)
    bm.allocate(b)
    assert len(a.block_table) == 3 and len(b.block_table) == 2  # ceil(10/4), ceil(5/4)
    assert not set(a.block_table) & set(b.block_table)
    assert bm.num_free_blocks == 3
    assert a.num_computed_tokens == 0 and b.num_computed_tokens == 0
    assert_consistent(bm, [a, b])


@pytest.mark.points(1)
def test_free_returns_every_block_last_block_first(assert_consistent):
    bm = BlockManager(num_blocks=8, block_size=BS, enable_prefix_caching=False)
    a = seq_of(0, list(range(10)))
    bm.allocate(a)
    table = list(a.block_table)
    bm.free(a)
    assert a.block_table == []
    assert bm.num_free_blocks == 8
    assert list(bm.free_block_ids)[-3:] == table[::-1]  # the tail is evicted before the prefix
    assert_consistent(bm, [])


@pytest.mark.points(1)
def test_append_slots_adds_a_block_only_when_a_block_fills(assert_consistent):
    bm = BlockManager(num_blocks=4, block_size=BS, enable_prefix_caching=False)
    a = seq_of(0, list(range(8)))  # exactly two full blocks
    bm.allocate(a)
    compute_all(bm, a)
    a.append_token(99)  # token 8 starts block 2
    assert bm.can_append_slots(a)
    bm.append_slots(a)
    assert len(a.block_table) == 3 and bm.num_free_blocks == 1
    a.num_computed_tokens = a.num_tokens
    a.append_token(98)  # token 9 still fits in block 2
    bm.append_slots(a)
    assert len(a.block_table) == 3 and bm.num_free_blocks == 1
    assert_consistent(bm, [a])


@pytest.mark.points(1)
def test_can_allocate_and_can_append_follow_the_free_list():
    bm = BlockManager(num_blocks=3, block_size=BS, enable_prefix_caching=False)
    a = seq_of(0, list(range(8)))
    assert bm.can_allocate(a)
    bm.allocate(a)
    assert not bm.can_allocate(seq_of(1, list(range(5))))  # needs 2 blocks, 1 free
    assert bm.can_allocate(seq_of(2, list(range(3))))
    b = seq_of(3, list(range(4)))
    bm.allocate(b)
    a.num_computed_tokens = 8
    a.append_token(1)
    assert not bm.can_append_slots(a)  # a needs a third block, none is free


@pytest.mark.points(2)
def test_prefix_cache_shares_full_computed_blocks(assert_consistent):
    bm = BlockManager(num_blocks=8, block_size=BS)
    a = seq_of(0, list(range(10)))
    bm.allocate(a)
    compute_all(bm, a)
    b = seq_of(1, list(range(8)) + [50, 51, 52])
    bm.allocate(b)
    assert b.block_table[:2] == a.block_table[:2]
    assert b.block_table[2] not in a.block_table
    assert b.num_cached_tokens == 8 and b.num_computed_tokens == 8
    assert [bm.blocks[i].ref_count for i in b.block_table] == [2, 2, 1]
    assert_consistent(bm, [a, b])


@pytest.mark.points(2)
def test_prefix_cache_never_shares_a_partial_block(assert_consistent):
    bm = BlockManager(num_blocks=8, block_size=BS)
    a = seq_of(0, list(range(10)))  # blocks [0..3] [4..7] [8, 9]
    bm.allocate(a)
    compute_all(bm, a)
    b = seq_of(1, list(range(10)))
    bm.allocate(b)
    assert b.num_cached_tokens == 8
    assert b.block_table[:2] == a.block_table[:2]
    assert b.block_table[2] != a.block_table[2], "the partial last block must not be shared"
    assert_consistent(bm, [a, b])


@pytest.mark.points(1)
def test_prefix_cache_leaves_the_last_token_to_compute():
    bm = BlockManager(num_blocks=8, block_size=BS)
    a = seq_of(0, list(range(8)))
    bm.allocate(a)
    compute_all(bm, a)
    b = seq_of(1, list(range(8)))  # identical prompt: the next-token logits still need token 7
    bm.allocate(b)
    assert b.num_computed_tokens == 4
    assert b.block_table[0] == a.block_table[0] and b.block_table[1] != a.block_table[1]


@pytest.mark.points(2)
def test_prefix_cache_hash_covers_the_whole_prefix():
    bm = BlockManager(num_blocks=8, block_size=BS)
    x, y = [1, 2, 3, 4], [5, 6, 7, 8]
    a = seq_of(0, x + y + [9])
    bm.allocate(a)
    compute_all(bm, a)
    b = seq_of(1, y + x + [9])  # block [5..8] first: same tokens, different prefix
    bm.allocate(b)
    assert b.num_cached_tokens == 0
    assert not set(a.block_table) & set(b.block_table)


@pytest.mark.points(2)
def test_freed_blocks_stay_cached_until_reused(assert_consistent):
    bm = BlockManager(num_blocks=4, block_size=BS)
    a = seq_of(0, list(range(9)))
    bm.allocate(a)
    compute_all(bm, a)
    first_two = a.block_table[:2]
    bm.free(a)
    b = seq_of(1, list(range(9)))
    bm.allocate(b)  # hits both full blocks although a is gone
    assert b.block_table[:2] == first_two and b.num_cached_tokens == 8
    assert not set(first_two) & set(bm.free_block_ids)
    assert_consistent(bm, [b])
    bm.free(b)
    fillers = [seq_of(2 + i, [100 + i] * 4) for i in range(4)]  # take every block: evicts the cache
    for f in fillers:
        bm.allocate(f)
    for f in fillers:
        bm.free(f)
    c = seq_of(9, list(range(9)))
    bm.allocate(c)
    assert c.num_cached_tokens == 0
    assert_consistent(bm, [c])
