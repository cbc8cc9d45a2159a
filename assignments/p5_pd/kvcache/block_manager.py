"""Paged KV bookkeeping: a fixed pool of blocks, block tables, reference counts and a prefix cache.

The pool holds `num_blocks` blocks of `block_size` token slots each; token position p of a
sequence lives in slot `block_table[p // block_size] * block_size + p % block_size`.

Prefix caching (vLLM's scheme): a *full* block whose K/V are computed is named by the chained hash
hash(parent block's hash, its own token ids), so one hash names the whole prefix up to the block's
end. A new sequence reuses the longest run of leading full blocks whose hashes are cached.
Blocks whose reference count drops to zero go back to the free queue but keep their hash: they
can still be hit until allocation needs them, at which point the least recently freed one is
evicted (LRU).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence as TokenIds
from dataclasses import dataclass

from .sequence import Sequence


def hash_block_tokens(parent_hash: int | None, token_ids: TokenIds[int]) -> int:
    """Chained hash of one full block: a function of the parent block's hash and this block's tokens.

    parent_hash: the hash of the previous block of the same sequence, None for the first block.
    Deterministic across processes (Python hashes ints and tuples of ints without a random seed;
    avoid hashing None or strings). Two blocks with equal tokens but different prefixes must
    (almost surely) get different hashes.
    """
    tokens = tuple(token_ids)
    return hash((tokens,)) if parent_hash is None else hash((parent_hash, tokens))


@dataclass(eq=False)
class Block:
    """One physical KV block.

    ref_count: live block tables holding this block (0: it sits in the free queue).
    hash: its chained hash while it is registered in the prefix cache, else None.
    token_ids: the tokens it held when registered (checked on a hit, to survive hash collisions).
    """

    block_id: int
    ref_count: int = 0
    hash: int | None = None
    token_ids: tuple[int, ...] = ()


@dataclass
class PrefixCacheStats:
    """Prefix-cache accounting, counted once per `allocate` call (re-admissions count again)."""

    num_queries: int = 0  # allocate calls
    query_tokens: int = 0  # tokens of the sequences looked up
    hit_tokens: int = 0  # tokens served from cached blocks

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0


class BlockManager:
    """Owns the block pool. Sequences hold block ids; this class holds everything else.

    Data structures (given):
      blocks: every Block, indexed by block id.
      free_queue: ids of blocks with ref_count 0, least recently freed first. At start it holds
        0, 1, ..., num_blocks - 1 in that order. Fresh blocks are taken from its front; freed
        blocks are appended at its back.
      cached: chained hash -> id of the block registered under it (the block may be free).
      watermark_blocks: blocks that admission (`can_allocate`) keeps free, to leave room for the
        running sequences to grow without preemption; appends ignore it.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        *,
        watermark: float = 0.0,
        enable_prefix_caching: bool = True,
    ) -> None:
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if not 0.0 <= watermark < 1.0:
            raise ValueError(f"watermark must be in [0, 1), got {watermark}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.watermark_blocks = int(watermark * num_blocks)
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_queue: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.cached: dict[int, int] = {}
        self.stats = PrefixCacheStats()

    @property
    def num_free_blocks(self) -> int:
        """Blocks with ref_count 0, cached or not (a free cached block can be evicted at will)."""
        return len(self.free_queue)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - len(self.free_queue)

    @property
    def num_cached_blocks(self) -> int:
        """Blocks registered in the prefix cache, in use or free."""
        return len(self.cached)

    def blocks_needed(self, num_tokens: int) -> int:
        """Blocks that hold num_tokens tokens: ceil(num_tokens / block_size)."""
        return -(-num_tokens // self.block_size)

    def _take_free_block(self) -> int:
        """Pop the least recently freed block, evict it from the prefix cache if it is registered
        there, give it ref_count 1 and return its id. RuntimeError when no block is free."""
        if not self.free_queue:
            raise RuntimeError("out of KV blocks: call can_allocate / can_append first")
        block_id, _ = self.free_queue.popitem(last=False)
        block = self.blocks[block_id]
        if block.hash is not None:
            del self.cached[block.hash]
            block.hash, block.token_ids = None, ()
        block.ref_count = 1
        return block_id

    def match_cached_blocks(self, seq: Sequence) -> list[int]:
        """Ids of the cached blocks that serve the longest prefix of seq.token_ids (pure query).

        Walks the full blocks of seq in order, chaining hashes, and stops at the first miss. Only
        the first num_tokens - 1 tokens are eligible, so at least one token is always left to
        compute (the model needs it to produce logits): at most (num_tokens - 1) // block_size
        blocks. A hit also requires the block's stored token_ids to equal the sequence's. Empty
        when prefix caching is off.
        """
        if not self.enable_prefix_caching:
            return []
        hits: list[int] = []
        parent: int | None = None
        for i in range((seq.num_tokens - 1) // self.block_size):
            tokens = tuple(seq.block_tokens(i, self.block_size))
            parent = hash_block_tokens(parent, tokens)
            block_id = self.cached.get(parent)
            if block_id is None or self.blocks[block_id].token_ids != tokens:
                break
            hits.append(block_id)
        return hits

    def can_allocate(self, seq: Sequence) -> bool:
        """Whether `allocate(seq)` fits while leaving `watermark_blocks` free.

        What allocation takes from the free queue: one fresh block for each block of seq's
        tokens that is not a cache hit, plus each hit block that is currently free (ref_count 0:
        reviving it removes it from the queue). Hits on blocks in use cost nothing. Fits when
        num_free_blocks - cost >= watermark_blocks.
        """
        hits = self.match_cached_blocks(seq)
        revived = sum(1 for b in hits if self.blocks[b].ref_count == 0)
        cost = self.blocks_needed(seq.num_tokens) - len(hits) + revived
        return self.num_free_blocks - cost >= self.watermark_blocks

    def allocate(self, seq: Sequence) -> None:
        """Give a waiting sequence blocks for all its tokens, reusing cached prefix blocks.

        Sets seq.block_table (hit blocks first, then fresh ones), seq.block_hashes (the hashes of
        the hit blocks), seq.num_cached_tokens = seq.num_computed_tokens = hits * block_size, and
        updates `stats`. Hit blocks get ref_count + 1 and, if they were free, leave the free queue
        BEFORE any fresh block is taken, so that taking fresh blocks can never evict a block
        this very call is reusing. ValueError if seq already holds blocks.
        """
        if seq.block_table:
            raise ValueError(f"sequence {seq.seq_id} already holds blocks")
        hits = self.match_cached_blocks(seq)
        for block_id in hits:
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self.free_queue[block_id]
            block.ref_count += 1
        fresh = [self._take_free_block() for _ in range(self.blocks_needed(seq.num_tokens) - len(hits))]
        seq.block_table = hits + fresh
        seq.block_hashes = [self.blocks[b].hash for b in hits]
        seq.num_cached_tokens = seq.num_computed_tokens = len(hits) * self.block_size
        self.stats.num_queries += 1
        self.stats.query_tokens += seq.num_tokens
        self.stats.hit_tokens += seq.num_cached_tokens

    def can_append(self, seq: Sequence) -> bool:
        """Whether `append_slot(seq)` can succeed: True when it needs no fresh block, or when a
        block is free. It needs one when seq's tokens outgrow its table, or when the block that
        will be written (the one holding position num_tokens - 1) is shared (copy-on-write)."""
        if len(seq.block_table) * self.block_size < seq.num_tokens:
            return self.num_free_blocks >= 1
        last = self.blocks[seq.block_table[(seq.num_tokens - 1) // self.block_size]]
        return last.ref_count == 1 or self.num_free_blocks >= 1

    def append_slot(self, seq: Sequence) -> tuple[int, int] | None:
        """Make sure position num_tokens - 1 (the token a decode step feeds) has a slot seq owns.

        If the table is one block short, append a fresh block. If the block holding that position
        is shared (ref_count > 1), copy-on-write: take a fresh block, drop one reference to the
        shared one, put the fresh one in the table and return (src_block, dst_block) so the engine
        copies the K/V already in it. Otherwise return None.
        """
        if len(seq.block_table) * self.block_size < seq.num_tokens:
            seq.block_table.append(self._take_free_block())
            return None
        index = (seq.num_tokens - 1) // self.block_size
        src = self.blocks[seq.block_table[index]]
        if src.ref_count == 1:
            return None
        dst = self._take_free_block()
        src.ref_count -= 1
        seq.block_table[index] = dst
        return src.block_id, dst

    def cache_full_blocks(self, seq: Sequence) -> None:
        """Register seq's blocks that became full and computed since the last call.

        Block i qualifies once (i + 1) * block_size <= seq.num_computed_tokens; blocks before
        len(seq.block_hashes) are done already. For each new one: chain its hash onto
        seq.block_hashes and, unless another block is already registered under that hash, record
        hash and token_ids on the block and in `cached`. A partial block is never registered: its
        tokens (hence its hash) will still change. No-op when prefix caching is off.
        """
        if not self.enable_prefix_caching:
            return
        for i in range(len(seq.block_hashes), seq.num_computed_tokens // self.block_size):
            tokens = tuple(seq.block_tokens(i, self.block_size))
            parent = seq.block_hashes[-1] if seq.block_hashes else None
            h = hash_block_tokens(parent, tokens)
            seq.block_hashes.append(h)
            if h not in self.cached:
                block = self.blocks[seq.block_table[i]]
                block.hash, block.token_ids = h, tokens
                self.cached[h] = block.block_id

    def free(self, seq: Sequence) -> None:
        """Drop seq's reference to each of its blocks, walking the table from its LAST block to its
        first, so that under LRU eviction a cached chain loses its tail before its head. A block
        reaching ref_count 0 is appended to the free queue and keeps its hash. Clears
        seq.block_table and seq.block_hashes."""
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free_queue[block_id] = None
        seq.block_table = []
        seq.block_hashes = []

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Share all of parent's blocks with child (parallel sampling): child gets a copy of the
        table and of block_hashes, every block one more reference, and parent's computed counts.
        Later writes go through `append_slot`, which copies a shared block first."""
        if child.block_table:
            raise ValueError(f"sequence {child.seq_id} already holds blocks")
        for block_id in parent.block_table:
            self.blocks[block_id].ref_count += 1
        child.block_table = list(parent.block_table)
        child.block_hashes = list(parent.block_hashes)
        child.num_computed_tokens = parent.num_computed_tokens
        child.num_cached_tokens = parent.num_cached_tokens
