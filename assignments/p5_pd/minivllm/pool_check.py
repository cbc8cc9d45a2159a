"""A consistency check of the KV pool, run after every step under `debug_check_invariants`.

It reads only the public state of stage 5's `kvcache.BlockManager` (`blocks`, `free_queue`, `cached`)
and the block tables of the running sequences, so it holds for any BlockManager with that state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import kvcache


def check_pool(block_manager: kvcache.BlockManager, running: Iterable[kvcache.Sequence]) -> None:
    """Raises RuntimeError when the pool's state disagrees with the block tables of `running`.

    `running` must be every sequence that holds blocks. Checks: a table never lists a block twice;
    each block's ref_count equals how many tables list it; the free queue holds exactly the blocks
    with ref_count 0; every prefix-cache entry points to a block that carries its hash.
    """
    holders: Counter[int] = Counter()
    for seq in running:
        if len(set(seq.block_table)) != len(seq.block_table):
            raise RuntimeError(f"sequence {seq.seq_id} lists a block twice: {seq.block_table}")
        holders.update(seq.block_table)
    for block in block_manager.blocks:
        if block.ref_count != holders[block.block_id]:
            raise RuntimeError(f"block {block.block_id}: ref_count {block.ref_count}, "
                               f"held by {holders[block.block_id]} sequence(s)")
    unheld = {b.block_id for b in block_manager.blocks if b.ref_count == 0}
    if set(block_manager.free_queue) != unheld:
        raise RuntimeError(f"the free queue holds {sorted(block_manager.free_queue)}, but the blocks with "
                           f"ref_count 0 are {sorted(unheld)} (a leak or a double free)")
    for h, block_id in block_manager.cached.items():
        if block_manager.blocks[block_id].hash != h:
            raise RuntimeError(f"prefix-cache entry for block {block_id} carries a stale hash")

