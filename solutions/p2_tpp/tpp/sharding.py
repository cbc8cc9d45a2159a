"""Who holds what: the rank grid (tp fastest), the even splits of heads, MLP columns and the
vocabulary over tp ranks, KV heads replicated when tp exceeds them, and layers over pp stages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParallelConfig:
    """tp ranks per stage, pp stages; world = tp * pp. Global rank = stage * tp + tp_rank (tp fastest,
    as Megatron-Core orders a TP x PP grid: a TP group is ranks that share a node's fast links).

    num_microbatches: how many micro-batches a step's batch is split into when pp > 1 (at most one
    per sequence), so that stage s computes micro-batch i while stage s+1 computes micro-batch i-1.
    """

    tp: int = 1
    pp: int = 1
    num_microbatches: int = 1

    def __post_init__(self) -> None:
        for name, value in (("tp", self.tp), ("pp", self.pp), ("num_microbatches", self.num_microbatches)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")

    @property
    def world_size(self) -> int:
        return self.tp * self.pp

    def coords(self, rank: int) -> tuple[int, int]:
        """Global rank -> (stage, tp_rank)."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} outside a world of {self.world_size} (tp={self.tp}, pp={self.pp})")
        return divmod(rank, self.tp)

    def rank_of(self, stage: int, tp_rank: int) -> int:
        return stage * self.tp + tp_rank


def split_range(size: int, rank: int, world: int) -> tuple[int, int]:
    """[start, end) of rank's even share of `size` items over `world` ranks (size % world == 0)."""
    if size % world:
        raise ValueError(f"{size} items do not split evenly over {world} ranks")
    # BEGIN SOLUTION
    share = size // world
    return rank * share, (rank + 1) * share
    # END SOLUTION


@dataclass(frozen=True)
class HeadShard:
    """The heads one tp rank holds: query heads [q_start, q_end) and KV heads [kv_start, kv_end)."""

    q_start: int
    q_end: int
    kv_start: int
    kv_end: int


def shard_heads(num_heads: int, num_kv_heads: int, tp: int, rank: int) -> HeadShard:
    """Query heads split evenly (num_heads % tp == 0). KV heads split evenly when tp <= num_kv_heads
    (num_kv_heads % tp == 0); when tp > num_kv_heads (tp % num_kv_heads == 0), each rank holds the
    one KV head its query heads read: tp // num_kv_heads ranks hold a copy of each.
    Query head q reads KV head q // (num_heads // num_kv_heads), as in one process."""
    if num_heads % tp:
        raise ValueError(f"{num_heads} query heads do not split over tp={tp}")
    if num_kv_heads % tp and tp % num_kv_heads:
        raise ValueError(f"{num_kv_heads} KV heads neither split over nor replicate evenly across tp={tp}")
    # BEGIN SOLUTION
    q_start, q_end = split_range(num_heads, rank, tp)
    if tp <= num_kv_heads:
        kv_start, kv_end = split_range(num_kv_heads, rank, tp)
    else:
        kv_start = rank // (tp // num_kv_heads)
        kv_end = kv_start + 1
    return HeadShard(q_start, q_end, kv_start, kv_end)
    # END SOLUTION


def stage_layers(num_layers: int, pp: int, stage: int) -> tuple[int, int]:
    """[start, end) of the decoder layers of `stage`. Layers split as evenly as they can; when they
    do not divide, the EARLIER stages take one extra each: the last stage also runs the final norm
    and the LM head (a hidden x vocab matmul per sampled row, about two layers' work on the course
    model), the first only the embedding lookup. 5 layers over 2 stages: (0, 3) and (3, 5)."""
    if not 1 <= pp <= num_layers:
        raise ValueError(f"pp={pp} stages need 1..{num_layers} layers each to hold at least one")
    if not 0 <= stage < pp:
        raise ValueError(f"stage {stage} outside 0..{pp - 1}")
    # BEGIN SOLUTION
    base, extra = divmod(num_layers, pp)
    start = stage * base + min(stage, extra)
    return start, start + base + (1 if stage < extra else 0)
    # END SOLUTION
