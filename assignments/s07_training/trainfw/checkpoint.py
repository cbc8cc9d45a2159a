"""A distributed checkpoint that reshards: saved by N ranks, loaded by M.

Each rank saves only what it owns, tagged with where it lies in the global flat vector (as
torch.distributed.checkpoint's metadata records each chunk's global offset): its shard of the
weights and of Adam's two moments, the step count, and the training loop's state (data position and
the RNG that draws the batches). A loading rank reads, from every saved shard, the part that
overlaps its own new range [start, end), so any world size can load any other's checkpoint.
Here the "files" are the dicts: the test stores what each rank returns and hands all of them to
every loading rank.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .data import LoopState
from .zero import ZeroAdam

SHARDED = ("params", "exp_avg", "exp_avg_sq")


def save_shard(opt: ZeroAdam, loop: LoopState) -> dict:
    """This rank's part of the checkpoint: {"numel", "start", "end", "step", "params", "exp_avg",
    "exp_avg_sq" (each (end - start,)), "loop": loop.state_dict()}, copies."""
    raise NotImplementedError("s07.2: save_shard")


def _check_cover(shards: list[dict], numel: int) -> None:
    """ValueError unless the saved shards tile [0, numel) exactly."""
    spans = sorted((s["start"], s["end"]) for s in shards)
    pos = 0
    for start, end in spans:
        if start != pos and end > start:
            raise ValueError(f"checkpoint: shards leave a gap or overlap at {pos}: {spans}")
        pos = max(pos, end)
    if pos != numel or any(s["numel"] != numel for s in shards):
        raise ValueError(f"checkpoint: shards cover [0, {pos}) of a {numel}-element model: {spans}")


def load_resharded(opt: ZeroAdam, shards: list[dict]) -> LoopState:
    """Fill this rank's new shard of the weights and moments from the overlapping parts of the
    saved `shards` (saved by any number of ranks), restore the step count, put the whole weights
    back into the module (stages 1 and 2; stage 3 keeps them released), and return the loop state
    saved with them. Every rank of opt's group must call it."""
    if not shards:
        raise ValueError("load_resharded: no shards")
    _check_cover(shards, opt.numel)
    raise NotImplementedError("s07.3: load_resharded")
