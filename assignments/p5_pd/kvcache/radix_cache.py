"""SGLang's RadixAttention cache: a radix tree from token prefixes to the KV slots that hold them.

Each edge carries a run of tokens (`key`) and, token for token, the KV slot index holding that
token's K/V (`value`). Any prefix shared by two requests is stored once. Running requests lock
the path of the prefix they use; eviction frees the least recently used unlocked leaves first.
Granularity is one token (SGLang's page_size = 1).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence as TokenIds
from dataclasses import dataclass, field


@dataclass(eq=False)
class RadixNode:
    """One node; the root has an empty key and no parent.

    key: the tokens on the edge from the parent to this node (non-empty except at the root).
    value: the KV slot of each token of key (same length as key).
    children: child nodes keyed by the first token of their key.
    lock_ref: running requests whose matched prefix passes through this node (> 0: not evictable).
    last_access: the cache's logical clock when this node was last matched or inserted through.
    node_id: creation order, to break ties in LRU order deterministically.
    """

    key: tuple[int, ...]
    value: tuple[int, ...]
    parent: RadixNode | None
    node_id: int
    children: dict[int, RadixNode] = field(default_factory=dict)
    lock_ref: int = 0
    last_access: int = 0

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class PrefixMatch:
    """The result of `match_prefix`: the KV slots of the matched prefix, in token order, and the
    node where the match ends (the root for an empty match); lock that node to protect the prefix."""

    value: tuple[int, ...]
    node: RadixNode

    @property
    def length(self) -> int:
        return len(self.value)


def _common_prefix_len(a: TokenIds[int], b: TokenIds[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class RadixCache:
    """A radix tree of cached prefixes.

    evictable_size: tokens held by unlocked nodes; protected_size: tokens held by locked nodes.
    The clock is a counter owned by this cache (no wall time), bumped once per match or insert.
    """

    def __init__(self) -> None:
        self._clock = 0
        self._next_id = 1
        self.root = RadixNode(key=(), value=(), parent=None, node_id=0)
        self.root.lock_ref = 1  # the root is never evicted
        self.evictable_size = 0
        self.protected_size = 0

    def total_size(self) -> int:
        """Tokens stored in the tree."""
        return self.evictable_size + self.protected_size

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _new_node(self, key: tuple[int, ...], value: tuple[int, ...], parent: RadixNode) -> RadixNode:
        node = RadixNode(key=key, value=value, parent=parent, node_id=self._next_id)
        self._next_id += 1
        return node

    def _split_node(self, child: RadixNode, split_len: int) -> RadixNode:
        """Split child's edge after split_len tokens (0 < split_len < len(child.key)).

        A new node takes the first split_len tokens (and values) and child's place under its
        parent; child keeps the rest and hangs below the new node. The new node inherits child's
        lock_ref and last_access, so locks and sizes stay consistent. Returns the new node.
        """
        parent = child.parent
        assert parent is not None
        new = self._new_node(child.key[:split_len], child.value[:split_len], parent)
        new.lock_ref, new.last_access = child.lock_ref, child.last_access
        parent.children[new.key[0]] = new
        child.key, child.value, child.parent = child.key[split_len:], child.value[split_len:], new
        new.children[child.key[0]] = child
        return new

    def match_prefix(self, key: TokenIds[int]) -> PrefixMatch:
        """The longest cached prefix of key.

        Walks down from the root; if the match ends inside an edge, splits that node so the
        returned node covers exactly the matched prefix. Every node on the path gets the current
        clock as last_access, the node whose edge the match ends inside included (touch it before
        splitting it: both halves then carry the clock). An empty match returns the root and an
        empty value.
        """
        now = self._tick()
        key = tuple(key)
        node, value = self.root, []
        node.last_access = now
        while key and key[0] in node.children:
            child = node.children[key[0]]
            child.last_access = now
            n = _common_prefix_len(child.key, key)
            if n < len(child.key):
                node = self._split_node(child, n)
                value.extend(node.value)
                break
            value.extend(child.value)
            node, key = child, key[n:]
        return PrefixMatch(value=tuple(value), node=node)

    def insert(self, key: TokenIds[int], value: TokenIds[int]) -> int:
        """Store key -> value (value[i] is the KV slot of key[i]); returns how many leading tokens
        were already cached. For those the tree keeps its own slots (the caller frees its
        duplicates); the remaining suffix becomes a new unlocked leaf. Splits an edge where key
        diverges from it; every node on the path gets the current clock as last_access, the edge
        it diverges from included (touched before the split, as in `match_prefix`).
        ValueError if key and value differ in length.
        """
        if len(key) != len(value):
            raise ValueError(f"key has {len(key)} tokens but value has {len(value)} slots")
        now = self._tick()
        key, value = tuple(key), tuple(value)
        node, matched = self.root, 0
        node.last_access = now
        while key and key[0] in node.children:
            child = node.children[key[0]]
            child.last_access = now
            n = _common_prefix_len(child.key, key)
            matched += n
            key, value = key[n:], value[n:]
            node = self._split_node(child, n) if n < len(child.key) else child
        if key:
            leaf = self._new_node(key, value, node)
            leaf.last_access = now
            node.children[key[0]] = leaf
            self.evictable_size += len(key)
        return matched

    def inc_lock_ref(self, node: RadixNode) -> None:
        """Lock the path from node up to (not including) the root: lock_ref + 1 on each node; a
        node going from 0 to 1 moves its tokens from evictable_size to protected_size."""
        while node is not self.root:
            if node.lock_ref == 0:
                self.evictable_size -= len(node.key)
                self.protected_size += len(node.key)
            node.lock_ref += 1
            assert node.parent is not None
            node = node.parent

    def dec_lock_ref(self, node: RadixNode) -> None:
        """Undo one `inc_lock_ref(node)`; a node going from 1 to 0 becomes evictable again.
        ValueError if a node on the path is not locked."""
        while node is not self.root:
            if node.lock_ref == 0:
                raise ValueError("dec_lock_ref on a node that is not locked")
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.evictable_size += len(node.key)
                self.protected_size -= len(node.key)
            assert node.parent is not None
            node = node.parent

    def evict(self, num_tokens: int) -> list[int]:
        """Free at least num_tokens tokens, or every evictable one if there are fewer.

        Repeatedly removes the unlocked leaf with the smallest (last_access, node_id); a parent
        left without children becomes a candidate in turn. Locked nodes and the root are never
        removed. Returns the freed KV slots, in eviction order.
        """
        heap = [(n.last_access, n.node_id, n) for n in self._leaves() if n.lock_ref == 0]
        heapq.heapify(heap)
        freed: list[int] = []
        while len(freed) < num_tokens and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            del parent.children[leaf.key[0]]
            freed.extend(leaf.value)
            self.evictable_size -= len(leaf.key)
            if parent is not self.root and parent.is_leaf and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access, parent.node_id, parent))
        return freed

    def _leaves(self) -> list[RadixNode]:
        """Every leaf below the root (given)."""
        leaves, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            if node.is_leaf:
                leaves.append(node)
            stack.extend(node.children.values())
        return leaves
