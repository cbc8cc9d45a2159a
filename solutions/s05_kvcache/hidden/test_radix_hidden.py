"""RadixCache edge cases: splitting a locked node, locked leaves, bad unlocks, LRU after splits."""

from __future__ import annotations

import pytest

from kvcache import RadixCache


@pytest.mark.points(2)
def test_splitting_a_locked_node_keeps_both_halves_locked():
    cache = RadixCache()
    cache.insert([1, 2, 3, 4], [10, 11, 12, 13])
    node = cache.match_prefix([1, 2, 3, 4]).node
    cache.inc_lock_ref(node)
    assert cache.protected_size == 4
    half = cache.match_prefix([1, 2]).node  # splits the locked edge
    assert half.lock_ref == 1 and half.key == (1, 2)
    cache.insert([1, 2, 9], [20, 21, 22])  # an unlocked sibling under the split
    assert cache.protected_size == 4 and cache.evictable_size == 1
    assert cache.evict(10) == [22]
    assert cache.match_prefix([1, 2, 3, 4]).value == (10, 11, 12, 13)
    cache.dec_lock_ref(node)
    assert cache.protected_size == 0 and cache.evictable_size == 4
    assert cache.evict(10) == [12, 13, 10, 11]  # leaf first, then its parent


@pytest.mark.points(2)
def test_a_locked_leaf_is_never_evicted_even_when_it_is_the_oldest():
    cache = RadixCache()
    cache.insert([5, 6], [50, 60])
    old = cache.match_prefix([5, 6]).node
    cache.inc_lock_ref(old)
    cache.insert([7], [70])
    cache.insert([8, 9], [80, 90])
    assert cache.evict(1) == [70]
    assert cache.evict(100) == [80, 90]
    assert cache.evict(100) == []
    assert cache.match_prefix([5, 6]).value == (50, 60) and cache.total_size() == 2


@pytest.mark.points(1)
def test_unlocking_an_unlocked_node_and_mismatched_insert_are_errors():
    cache = RadixCache()
    cache.insert([1, 2], [3, 4])
    node = cache.match_prefix([1, 2]).node
    with pytest.raises(ValueError):
        cache.dec_lock_ref(node)
    with pytest.raises(ValueError):
        cache.insert([1, 2, 3], [7])
    assert cache.evict(0) == [] and cache.total_size() == 2


@pytest.mark.points(1)
def test_two_locks_need_two_unlocks():
    cache = RadixCache()
    cache.insert([1, 2, 3], [4, 5, 6])
    node = cache.match_prefix([1, 2, 3]).node
    cache.inc_lock_ref(node)
    cache.inc_lock_ref(node)
    cache.dec_lock_ref(node)
    assert cache.evict(10) == [] and cache.protected_size == 3
    cache.dec_lock_ref(node)
    assert cache.evict(10) == [4, 5, 6]
