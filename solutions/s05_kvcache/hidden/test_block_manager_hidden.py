"""BlockManager edge cases: chunked computation and partial blocks, collisions, duplicates, COW."""

from __future__ import annotations

import pytest

import kvcache.block_manager as block_manager_module
from conftest import check_pool
from kvcache import BlockManager, Sequence


def allocated(bm, seq):
    bm.allocate(seq)
    return seq


@pytest.mark.points(2)
def test_partial_block_is_registered_only_once_it_fills():
    bm = BlockManager(16, 4)
    a = allocated(bm, Sequence(0, list(range(1, 10)), 4))  # 9 tokens: blocks of 4, 4, 1
    a.num_computed_tokens = 5  # a chunked prefill computed 5 tokens
    bm.cache_full_blocks(a)
    assert bm.num_cached_blocks == 1 and len(a.block_hashes) == 1
    a.num_computed_tokens = 9
    bm.cache_full_blocks(a)
    assert bm.num_cached_blocks == 2 and len(a.block_hashes) == 2
    b = allocated(bm, Sequence(1, list(range(1, 10)) + [50, 51], 1))
    assert b.num_cached_tokens == 8  # both full blocks hit, with hashes chained the same way
    assert b.block_hashes == a.block_hashes


@pytest.mark.points(1)
def test_blocks_computed_by_a_running_prefill_are_not_hit_early():
    bm = BlockManager(16, 4)
    a = allocated(bm, Sequence(0, list(range(1, 13)), 1))
    a.num_computed_tokens = 4
    bm.cache_full_blocks(a)
    b = allocated(bm, Sequence(1, list(range(1, 13)), 1))
    assert b.num_cached_tokens == 4  # blocks 2 and 3 of A have no K/V yet


@pytest.mark.points(2)
def test_hash_collision_does_not_serve_foreign_tokens(monkeypatch):
    monkeypatch.setattr(block_manager_module, "hash_block_tokens", lambda parent, tokens: 7)
    bm = BlockManager(8, 2)
    a = allocated(bm, Sequence(0, [1, 2, 3], 1))
    a.num_computed_tokens = 3
    bm.cache_full_blocks(a)
    b = allocated(bm, Sequence(1, [8, 9, 3], 1))  # same (forced) hash, other tokens
    assert b.num_cached_tokens == 0 and b.block_table[0] != a.block_table[0]
    c = allocated(bm, Sequence(2, [1, 2, 5], 1))
    assert c.num_cached_tokens == 2


@pytest.mark.points(2)
def test_duplicate_content_is_registered_once_and_freed_cleanly():
    bm = BlockManager(8, 2)
    a = allocated(bm, Sequence(0, [1, 2, 3], 1))
    b = allocated(bm, Sequence(1, [1, 2, 3], 1))  # admitted before A computed anything: no hit
    assert b.num_cached_tokens == 0 and a.block_table[0] != b.block_table[0]
    for seq in (a, b):
        seq.num_computed_tokens = 3
        bm.cache_full_blocks(seq)
    assert bm.num_cached_blocks == 1 and a.block_hashes == b.block_hashes
    check_pool(bm, [a, b])
    first_a, first_b = a.block_table[0], b.block_table[0]
    bm.free(a)
    bm.free(b)
    check_pool(bm, [])
    c = allocated(bm, Sequence(2, [1, 2, 9], 1))
    assert c.num_cached_tokens == 2 and c.block_table[0] == first_a != first_b


@pytest.mark.points(1)
def test_no_prefix_caching_means_no_hits_and_no_registration():
    bm = BlockManager(8, 2, enable_prefix_caching=False)
    a = allocated(bm, Sequence(0, [1, 2, 3, 4, 5], 1))
    a.num_computed_tokens = 5
    bm.cache_full_blocks(a)
    assert bm.num_cached_blocks == 0
    b = allocated(bm, Sequence(1, [1, 2, 3, 4, 5], 1))
    assert b.num_cached_tokens == 0 and bm.stats.hit_rate == 0.0


@pytest.mark.points(1)
def test_watermark_applies_to_admission_not_to_appends():
    bm = BlockManager(10, 2, watermark=0.3)  # 3 blocks kept free at admission
    a = allocated(bm, Sequence(0, list(range(1, 14)), 4))  # 7 blocks: 10 - 7 = 3
    assert not bm.can_allocate(Sequence(1, [1], 1))
    a.num_computed_tokens = 13
    a.append_token(99)
    assert bm.can_append(a)
    assert bm.append_slot(a) is None and bm.num_free_blocks == 3  # 14 tokens fit 7 blocks
    a.num_computed_tokens = 14
    a.append_token(98)
    bm.append_slot(a)
    assert bm.num_free_blocks == 2  # below the watermark: appends may use it


@pytest.mark.points(1)
def test_allocate_twice_is_an_error_and_hit_rate_counts_tokens():
    bm = BlockManager(8, 2)
    a = allocated(bm, Sequence(0, [1, 2, 3], 1))
    with pytest.raises(ValueError):
        bm.allocate(a)
    a.num_computed_tokens = 3
    bm.cache_full_blocks(a)
    allocated(bm, Sequence(1, [1, 2, 3, 4, 5], 1))
    assert bm.stats.hit_rate == pytest.approx(2 / 8, rel=1e-12)
