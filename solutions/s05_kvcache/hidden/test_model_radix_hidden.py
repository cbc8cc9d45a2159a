"""Model-based test of the RadixCache: random insert / match / lock / unlock / evict over keys from a
three-token alphabet (many shared prefixes, splits inside edges), run on the package and on a small
model written here, with every observable compared after every operation: match values, lengths
and the matched node's key and lock, insert's cached length, what evict frees and in what order,
the sizes, and the whole tree (each node's full prefix, slots and lock count). A failure shrinks to
a short operation sequence that Hypothesis prints.

Budget: a fixed seed; AUTOGRADER_HYPOTHESIS_PROFILE=thorough runs ten times as many examples.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test
from kvcache import RadixCache, RadixNode

from autograder.testing import in_the_worker, in_worker

if not in_the_worker():  # judge-side helpers
    from kv_model import run_trace

SCALE = 10 if os.environ.get("AUTOGRADER_HYPOTHESIS_PROFILE") == "thorough" else 1
MODEL_SETTINGS = settings(max_examples=60 * SCALE, stateful_step_count=30, derandomize=True, database=None,
                          deadline=None, phases=[Phase.explicit, Phase.generate, Phase.shrink],
                          report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
KEYS = st.lists(st.integers(1, 3), min_size=1, max_size=6)


# ---- the model: nodes keyed by the whole prefix they end (a path never changes when split above) --
@dataclass
class MNode:
    parent: tuple[int, ...]  # the path of the parent node
    value: tuple[int, ...]  # the slots of this node's edge
    last: int  # the clock when last matched or inserted through
    lock: int
    node_id: int  # creation order


class RadixModel:
    def __init__(self) -> None:
        self.nodes: dict[tuple[int, ...], MNode] = {}
        self.clock, self.next_id = 0, 1

    def _child(self, path: tuple, token: int) -> tuple | None:
        return next((p for p, n in self.nodes.items() if n.parent == path and p[len(path)] == token), None)

    def _walk(self, key: tuple) -> tuple:
        """Touch every node the key passes through (the one it ends inside too) and split there."""
        self.clock += 1
        path: tuple = ()
        while len(path) < len(key) and (child := self._child(path, key[len(path)])) is not None:
            self.nodes[child].last = self.clock
            common = len(path)
            while common < min(len(child), len(key)) and child[common] == key[common]:
                common += 1
            if common < len(child):  # the key leaves (or ends inside) this edge: split it there
                node = self.nodes[child]
                cut = common - len(node.parent)
                self.nodes[child[:common]] = MNode(node.parent, node.value[:cut], node.last, node.lock, self.next_id)
                self.next_id += 1
                node.parent, node.value = child[:common], node.value[cut:]
                return child[:common]
            path = child
        return path

    def slots(self, path: tuple) -> list[int]:
        out: list[int] = []
        while path:
            out[:0] = self.nodes[path].value
            path = self.nodes[path].parent
        return out

    def match(self, key: tuple) -> tuple[list[int], tuple]:
        path = self._walk(key)
        return self.slots(path), path

    def insert(self, key: tuple, value: tuple) -> int:
        path = self._walk(key)
        if len(key) > len(path):
            self.nodes[key] = MNode(path, value[len(path) :], self.clock, 0, self.next_id)
            self.next_id += 1
        return len(path)

    def lock(self, path: tuple, delta: int) -> None:
        while path:
            self.nodes[path].lock += delta
            path = self.nodes[path].parent

    def evict(self, num_tokens: int) -> list[int]:
        freed: list[int] = []
        while len(freed) < num_tokens:
            leaves = [p for p, n in self.nodes.items()
                      if n.lock == 0 and not any(m.parent == p for m in self.nodes.values())]
            if not leaves:
                break
            path = min(leaves, key=lambda p: (self.nodes[p].last, self.nodes[p].node_id))
            freed += self.nodes.pop(path).value
        return freed

    def observed(self) -> list:
        tree = sorted([list(p), list(n.value), n.lock] for p, n in self.nodes.items())
        evictable = sum(len(n.value) for n in self.nodes.values() if n.lock == 0)
        protected = sum(len(n.value) for n in self.nodes.values() if n.lock > 0)
        return [tree, evictable, protected, evictable + protected]


# ---- in the worker: apply one operation, record the tree -----------------------------------------
def _observed(cache: RadixCache) -> list:
    tree, stack = [], [(cache.root, [])]
    while stack:
        node, path = stack.pop()
        for child in node.children.values():
            full = path + list(child.key)
            tree.append([full, list(child.value), child.lock_ref])
            stack.append((child, full))
    return [sorted(tree), cache.evictable_size, cache.protected_size, cache.total_size()]


@in_worker
def radix_op(cache: RadixCache, op: str, arg: list, node: RadixNode | None) -> list:
    """[answer, the matched node (lock) or None, observed]."""
    answer, matched = None, None
    if op in ("match", "lock"):
        m = cache.match_prefix(arg[0])
        matched = m.node
        answer = [list(m.value), m.length, list(m.node.key), m.node.lock_ref]
        if op == "lock":
            cache.inc_lock_ref(m.node)
    elif op == "unlock":
        cache.dec_lock_ref(node)
    elif op == "insert":
        answer = cache.insert(arg[0], arg[1])
    elif op == "evict":
        answer = cache.evict(arg[0])
    return [answer, matched if op == "lock" else None, _observed(cache)]


# ---- in the judge: the machine ---------------------------------------------------------------
class RadixMachine(RuleBasedStateMachine):
    """Drives the package's RadixCache and the model with the same operations."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = RadixCache()
        self.model = RadixModel()
        self.locks: list = []  # [model path, the package's node] per lock held
        self.next_slot = 100

    def _apply(self, what: str, op: str, arg: list, node=None):
        answer, matched, observed = radix_op(self.cache, op, arg, node)
        names = ["tree [full prefix, slots, lock_ref] per node", "evictable_size", "protected_size", "total_size()"]
        for name, got, exp in zip(names, observed, self.model.observed()):
            assert got == exp, f"after {what}: {name} is {got}, the handout's rules give {exp}"
        return answer, matched

    def _match(self, op: str, key: list[int]) -> None:
        slots, path = self.model.match(tuple(key))
        node = self.model.nodes.get(path)
        want = [slots, len(slots), list(path[len(node.parent):]) if node else [], node.lock if node else 1]
        if op == "lock":
            self.model.lock(path, +1)
        answer, matched = self._apply(f"{op}: match_prefix({key})", op, [key])
        assert answer == want, (f"match_prefix({key}) gave [value, length, node.key, node.lock_ref] {answer}, "
                                f"expected {want}")
        if op == "lock":
            self.locks.append([path, matched])

    @rule(key=KEYS)
    def match(self, key):
        self._match("match", key)

    @rule(key=KEYS)
    def lock(self, key):
        self._match("lock", key)

    @precondition(lambda self: self.locks)
    @rule(i=st.integers(0, 10))
    def unlock(self, i):
        path, node = self.locks.pop(i % len(self.locks))
        self.model.lock(path, -1)
        self._apply(f"dec_lock_ref(the node of {list(path)})", "unlock", [], node)

    @rule(key=KEYS)
    def insert(self, key):
        value = list(range(self.next_slot, self.next_slot + len(key)))
        self.next_slot += len(key)
        want = self.model.insert(tuple(key), tuple(value))
        answer, _ = self._apply(f"insert({key}, {value})", "insert", [key, value])
        assert answer == want, f"insert({key}, ...) returned {answer}, expected {want} tokens already cached"

    @rule(num_tokens=st.integers(0, 6))
    def evict(self, num_tokens):
        want = self.model.evict(num_tokens)
        answer, _ = self._apply(f"evict({num_tokens})", "evict", [num_tokens])
        assert answer == want, f"evict({num_tokens}) freed {answer}, the LRU rule frees {want} (in this order)"


# Rare in a small random budget, so always replayed.
PINNED = {
    # a match ending inside an edge touches the whole edge (both halves of the split): an older leaf
    # goes first
    "partial_match_refreshes_the_split_edge": [
        ("insert", {"key": [1, 2, 3]}), ("insert", {"key": [2]}), ("match", {"key": [1]}),
        ("evict", {"num_tokens": 1}), ("lock", {"key": [1, 2]}), ("insert", {"key": [1, 3]}),
        ("evict", {"num_tokens": 6})],
    # an insert that splits an edge leaves two leaves with one time: the older node goes first; a
    # new leaf carries the clock, so it outlives an older one
    "equal_times_evict_the_older_node_first": [
        ("insert", {"key": [1, 2, 3]}), ("insert", {"key": [1, 2, 1]}), ("evict", {"num_tokens": 1}),
        ("insert", {"key": [3]}), ("match", {"key": [2]}), ("insert", {"key": [2, 2]}), ("evict", {"num_tokens": 1}),
        ("evict", {"num_tokens": 6})],
}


@pytest.mark.points(2)
@pytest.mark.parametrize("trace", PINNED.values(), ids=PINNED.keys())
def test_radix_cache_matches_the_model_on_pinned_traces(trace):
    """The same comparison as below on a fixed operation sequence."""
    run_trace(RadixMachine(), trace)


@pytest.mark.points(4)
def test_radix_cache_matches_the_model_under_random_operations():
    """The tree, the sizes, and every match, insert and evict answer equal the model's after each
    operation; eviction order is least recently used first, ties by creation order."""
    run_state_machine_as_test(RadixMachine, settings=MODEL_SETTINGS)
