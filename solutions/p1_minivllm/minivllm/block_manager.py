"""KV block bookkeeping: which physical blocks each sequence owns, and the prefix cache.

The pool holds `num_blocks` blocks of `block_size` token slots each. A block is either free
(ref_count 0, listed once in `free_block_ids`) or held by the sequences whose block tables list it
(ref_count = how many). Only prefix-cache hits make a block shared (ref_count > 1).

Prefix cache: a full block whose K/V are all computed is registered under a chained hash of its
tokens and of every block before it, so equal hashes mean equal whole prefixes. A freed block keeps
its hash and can still be hit, until the free list hands it out again (least recently freed first).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence as Seq
from dataclasses import dataclass

from .sequence import Sequence


def hash_block(parent: int | None, token_ids: Seq[int]) -> int:
    """Chained hash of one full block: equal only for equal tokens after an equal prefix.

    parent: the hash of the previous block of the sequence, None for the first block.
    """
    # BEGIN SOLUTION
    return hash((parent, tuple(token_ids)))
    # END SOLUTION


@dataclass
class Block:
    """One physical KV block. `hash`/`token_ids` are set once the block is registered in the cache."""

    block_id: int
    ref_count: int = 0
    hash: int | None = None
    token_ids: tuple[int, ...] = ()


class BlockManager:
    """Allocates and frees KV blocks for sequences; optional prefix caching.

    Public state (read by tests and by `check_invariants`):
      blocks: list[Block], indexed by block id.
      free_block_ids: the free block ids as an ordered set (OrderedDict id -> None), least recently
        freed first: popitem(last=False) takes the oldest, `del` removes a prefix-cache hit and
        assignment appends, all O(1) (a deque's remove is O(free blocks): a GPU pool has ~10^5).
      hash_to_block_id: prefix-cache table, chained hash -> block id.
    """

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"need num_blocks >= 1 and block_size >= 1, got {num_blocks}, {block_size}")
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_block_ids: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.hash_to_block_id: dict[int, int] = {}

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    def _hashable_blocks(self, num_tokens: int) -> int:
        """How many leading blocks of a `num_tokens`-token run can be hashed: only full blocks."""
        # BEGIN SOLUTION
        return num_tokens // self.block_size
        # END SOLUTION

    def _take_free_block(self) -> int:
        """Pops the least recently freed block, drops its prefix-cache entry, returns it with ref_count 1."""
        # BEGIN SOLUTION
        block_id, _ = self.free_block_ids.popitem(last=False)
        block = self.blocks[block_id]
        if block.hash is not None and self.hash_to_block_id.get(block.hash) == block_id:
            del self.hash_to_block_id[block.hash]
        block.hash, block.token_ids, block.ref_count = None, (), 1
        return block_id
        # END SOLUTION

    def _cached_prefix(self, seq: Sequence) -> list[tuple[int, int]]:
        """(block id, hash) of seq's leading full blocks found in the prefix cache, up to the first miss.

        A hit needs the same chained hash and the same tokens (hashes can collide). Hits never cover
        seq's last token: it must be computed again to get the logits of the next token.
        """
        # BEGIN SOLUTION
        hits: list[tuple[int, int]] = []
        parent: int | None = None
        for i in range(self._hashable_blocks(seq.num_tokens - 1)):
            tokens = seq.block_tokens(i)
            h = hash_block(parent, tokens)
            block_id = self.hash_to_block_id.get(h)
            if block_id is None or self.blocks[block_id].token_ids != tuple(tokens):
                break
            hits.append((block_id, h))
            parent = h
        return hits
        # END SOLUTION

    def can_allocate(self, seq: Sequence) -> bool:
        """True when the free list could hold every block of seq (cache hits ignored: conservative)."""
        # BEGIN SOLUTION
        return seq.num_blocks <= len(self.free_block_ids)
        # END SOLUTION

    def allocate(self, seq: Sequence) -> None:
        """Gives a sequence without blocks the blocks for all its current tokens.

        With prefix caching, the leading hits of `_cached_prefix` are shared (ref_count + 1; a free
        hit leaves the free list) and seq.block_hashes records their hashes; the other blocks come
        fresh from `_take_free_block`. Sets seq.num_cached_tokens and seq.num_computed_tokens to the
        number of tokens the hits hold.
        """
        if seq.block_table:
            raise RuntimeError(f"sequence {seq.seq_id} already holds blocks")
        # BEGIN SOLUTION
        hits = self._cached_prefix(seq) if self.enable_prefix_caching else []
        for block_id, h in hits:
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self.free_block_ids[block_id]
            block.ref_count += 1
            seq.block_table.append(block_id)
            seq.block_hashes.append(h)
        while len(seq.block_table) < seq.num_blocks:
            seq.block_table.append(self._take_free_block())
        seq.num_cached_tokens = min(len(hits) * self.block_size, seq.num_tokens - 1)
        seq.num_computed_tokens = seq.num_cached_tokens
        # END SOLUTION

    def can_append_slots(self, seq: Sequence) -> bool:
        """True when the free list holds the blocks seq still needs to cover all its tokens."""
        # BEGIN SOLUTION
        return seq.num_blocks - len(seq.block_table) <= len(self.free_block_ids)
        # END SOLUTION

    def append_slots(self, seq: Sequence) -> None:
        """Adds fresh blocks to seq's table until it covers all seq's tokens (a decode needs at most one)."""
        # BEGIN SOLUTION
        while len(seq.block_table) < seq.num_blocks:
            seq.block_table.append(self._take_free_block())
        # END SOLUTION

    def cache_blocks(self, seq: Sequence) -> None:
        """Registers seq's full, fully computed blocks that are not registered yet (no-op without caching).

        Block i (i = len(seq.block_hashes), ...) gets hash_block(hash of block i-1, its tokens) and its
        token ids; the table keeps the block already registered under that hash if there is one.
        """
        # BEGIN SOLUTION
        if not self.enable_prefix_caching:
            return
        for i in range(len(seq.block_hashes), self._hashable_blocks(seq.num_computed_tokens)):
            parent = seq.block_hashes[-1] if seq.block_hashes else None
            tokens = tuple(seq.block_tokens(i))
            h = hash_block(parent, tokens)
            block = self.blocks[seq.block_table[i]]
            block.hash, block.token_ids = h, tokens
            self.hash_to_block_id.setdefault(h, block.block_id)
            seq.block_hashes.append(h)
        # END SOLUTION

    def free(self, seq: Sequence) -> None:
        """Releases seq's blocks, last block first; a block with no holder left joins the free list's end.

        Freed blocks keep their hash (a later request can still hit them). Empties seq.block_table
        and seq.block_hashes.
        """
        # BEGIN SOLUTION
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free_block_ids[block_id] = None
        seq.block_table.clear()
        seq.block_hashes.clear()
        # END SOLUTION

    def check_invariants(self, seqs: Iterable[Sequence]) -> None:
        """Raises RuntimeError when the pool's state disagrees with the block tables of `seqs`.

        `seqs` must be every sequence that holds blocks (the running ones). Checks: each block's
        ref_count equals how many tables list it; a table never lists a block twice; the free list
        holds exactly the blocks with ref_count 0, each once; a shared block is a registered full block;
        every cache entry points to a block carrying that hash.
        """
        holders = Counter()
        for seq in seqs:
            if len(set(seq.block_table)) != len(seq.block_table):
                raise RuntimeError(f"sequence {seq.seq_id} lists a block twice: {seq.block_table}")
            holders.update(seq.block_table)
        for block in self.blocks:
            if block.ref_count != holders[block.block_id]:
                raise RuntimeError(f"block {block.block_id}: ref_count {block.ref_count}, "
                                   f"held by {holders[block.block_id]} sequence(s)")
            if block.ref_count > 1 and len(block.token_ids) != self.block_size:
                raise RuntimeError(f"block {block.block_id} is shared but is not a full cached block")
        free = list(self.free_block_ids)
        if len(set(free)) != len(free):
            raise RuntimeError("a block is listed twice in the free list")
        if set(free) != {b.block_id for b in self.blocks if b.ref_count == 0}:
            raise RuntimeError("the free list differs from the set of blocks with ref_count 0 (leak?)")
        for h, block_id in self.hash_to_block_id.items():
            if self.blocks[block_id].hash != h:
                raise RuntimeError(f"cache entry for block {block_id} carries a stale hash")
