"""RadixCache: insert, match_prefix with node split, lock references, LRU eviction of unlocked leaves."""

from __future__ import annotations

import pytest
from autograder.testing import in_worker
from hypothesis import given
from hypothesis import strategies as st

from conftest import PROPERTY_SETTINGS
from kvcache import RadixCache, RadixNode


def stored_values(cache: RadixCache) -> list[int]:
    """Every KV slot held by the tree (walks the public node structure)."""
    out, stack = [], [cache.root]
    while stack:
        node = stack.pop()
        out.extend(node.value)
        stack.extend(node.children.values())
    return out


def edges(node: RadixNode) -> dict[tuple[int, ...], tuple[int, ...]]:
    return {child.key: child.value for child in node.children.values()}


@pytest.mark.points(2)
def test_insert_shares_prefixes_and_reports_the_cached_length():
    cache = RadixCache()
    assert cache.insert([1, 2, 3, 4], [10, 11, 12, 13]) == 0
    assert cache.insert([1, 2, 5], [20, 21, 22]) == 2  # the caller frees its slots 20, 21
    assert edges(cache.root) == {(1, 2): (10, 11)}
    inner = cache.root.children[1]
    assert edges(inner) == {(3, 4): (12, 13), (5,): (22,)}
    assert cache.total_size() == 5 and cache.evictable_size == 5 and cache.protected_size == 0
    assert cache.insert([1, 2, 3, 4], [30, 31, 32, 33]) == 4
    assert cache.total_size() == 5


@pytest.mark.points(2)
def test_match_prefix_returns_slots_and_splits_inside_an_edge():
    cache = RadixCache()
    cache.insert([1, 2, 3, 4], [10, 11, 12, 13])
    m = cache.match_prefix([1, 2, 3, 9, 9])
    assert m.value == (10, 11, 12) and m.length == 3
    assert m.node.key == (1, 2, 3) and m.node.value == (10, 11, 12)  # split so the node is exact
    assert edges(m.node) == {(4,): (13,)}
    assert cache.total_size() == 4  # a split moves tokens, it does not add any
    empty = cache.match_prefix([7, 1])
    assert empty.length == 0 and empty.node is cache.root
    assert cache.match_prefix([1, 2, 3, 4, 5]).value == (10, 11, 12, 13)


@pytest.mark.points(2)
def test_locked_prefix_survives_eviction_and_unlocking_releases_it():
    cache = RadixCache()
    cache.insert([1, 2, 3, 4], [10, 11, 12, 13])
    cache.insert([1, 2, 5], [20, 21, 22])
    m = cache.match_prefix([1, 2, 5])
    cache.inc_lock_ref(m.node)
    assert cache.protected_size == 3 and cache.evictable_size == 2
    freed = cache.evict(100)
    assert sorted(freed) == [12, 13]  # only the unlocked branch goes
    assert cache.match_prefix([1, 2, 5]).value == (10, 11, 22)
    assert cache.evictable_size == 0 and cache.protected_size == 3
    cache.dec_lock_ref(m.node)
    assert cache.evictable_size == 3 and cache.protected_size == 0
    assert sorted(cache.evict(100)) == [10, 11, 22]
    assert cache.total_size() == 0 and cache.match_prefix([1, 2, 5]).length == 0


@pytest.mark.points(2)
def test_evict_frees_least_recently_used_leaves_first():
    cache = RadixCache()
    cache.insert([1], [100])
    cache.insert([2], [200])
    cache.insert([3], [300])
    cache.match_prefix([1])  # [1] is now the most recently used
    assert cache.evict(1) == [200]
    assert cache.evict(1) == [300]
    assert cache.evict(1) == [100]
    assert cache.evict(1) == []


_keys = st.lists(st.lists(st.integers(0, 2), min_size=0, max_size=8), min_size=1, max_size=12)


@in_worker
def record_inserts_and_matches(keys, queries):
    """In the worker (one request per example): insert each key with fresh slots, then match
    every query and key. Returns what insert and total_size answered after each key, the value of
    each match, and the slots stored at the end."""
    cache = RadixCache()
    inserted, sizes, slot = [], [], 0
    for key in keys:
        inserted.append(cache.insert(key, list(range(slot, slot + len(key)))))
        slot += len(key)
        sizes.append(cache.total_size())
    return inserted, sizes, [cache.match_prefix(q).value for q in queries + keys], stored_values(cache)


@pytest.mark.points(3)
@PROPERTY_SETTINGS
@given(keys=_keys, queries=st.lists(st.lists(st.integers(0, 2), max_size=9), min_size=1, max_size=8))
def test_match_equals_brute_force_longest_common_prefix(keys, queries):
    """Against a dict of every inserted prefix (first writer keeps its slot): insert reports the
    cached length, match returns the longest cached prefix with the right slots."""
    inserted, sizes, matches, stored = record_inserts_and_matches(keys, queries)
    oracle: dict[tuple[int, ...], int] = {}
    slot = 0
    for key, got, size in zip(keys, inserted, sizes, strict=True):
        values = list(range(slot, slot + len(key)))
        slot += len(key)
        known = 0
        while known < len(key) and tuple(key[: known + 1]) in oracle:
            known += 1
        assert got == known
        for i in range(len(key)):
            oracle.setdefault(tuple(key[: i + 1]), values[i])
        assert size == len(oracle)
    for q, got in zip(queries + keys, matches, strict=True):
        want = []
        while len(want) < len(q) and tuple(q[: len(want) + 1]) in oracle:
            want.append(oracle[tuple(q[: len(want) + 1])])
        assert got == tuple(want)
    assert sorted(stored) == sorted(oracle.values())


@in_worker
def record_locks_and_evict(keys, lock_picks, budget):
    """In the worker (one request per example): insert the keys, lock the match of each picked
    key, evict `budget`. Returns the slots stored before, each lock's (key, matched value), the
    evictable size before evicting, what evict freed, the slots stored and total_size after, and
    each locked key's match value after."""
    cache = RadixCache()
    slot = 0
    for key in keys:
        cache.insert(key, list(range(slot, slot + len(key))))
        slot += len(key)
    before = stored_values(cache)
    locked = []
    for pick in lock_picks:
        key = keys[pick % len(keys)]
        m = cache.match_prefix(key)
        cache.inc_lock_ref(m.node)
        locked.append([key, m.value])
    evictable = cache.evictable_size
    freed = cache.evict(budget)
    stored, total = stored_values(cache), cache.total_size()
    return before, locked, evictable, freed, stored, total, [cache.match_prefix(key).value for key, _ in locked]


@pytest.mark.points(3)
@PROPERTY_SETTINGS
@given(keys=_keys, lock_picks=st.lists(st.integers(0, 11), max_size=4), budget=st.integers(0, 40))
def test_evict_never_frees_locked_or_twice_and_loses_no_slot(keys, lock_picks, budget):
    before, locked, evictable, freed, stored, total, after = record_locks_and_evict(keys, lock_picks, budget)
    before = sorted(before)
    assert len(freed) == len(set(freed)), "a slot was freed twice"
    assert len(freed) >= min(budget, evictable)
    assert sorted(freed + stored) == before, "slots lost or invented"
    assert total == len(before) - len(freed)
    for (key, value), now in zip(locked, after, strict=True):
        assert now == value, "a locked prefix was evicted"
