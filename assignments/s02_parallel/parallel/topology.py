"""Rank topology: which GPU holds which slice of the model, and who talks to whom.

Megatron-Core's convention (`megatron/core/parallel_state.py`, `RankGenerator`, default order
"tp-cp-ep-dp-pp"): a global rank is a point of the grid tp x cp x dp x pp with tp varying
fastest and pp slowest,

    rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank)).

Tensor-parallel peers are neighbours (one NVLink island), pipeline stages are far apart. The
expert layers use a second grid over the same ranks, tp x ep x edp x pp (tp fastest): expert
parallelism is carved out of dp x cp, so ep * edp = dp * cp (the expert tensor-parallel size is
tp here, Megatron's default).

A group of kind "dp-cp" is the set of ranks that differ only in their dp and cp coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch.distributed as dist

# Group kinds: dimensions joined by "-". Decoder kinds live on the tp-cp-dp-pp grid, expert kinds
# (those with "ep" or "edp") on the tp-ep-edp-pp grid.
DECODER_ORDER = ("tp", "cp", "dp", "pp")
EXPERT_ORDER = ("tp", "ep", "edp", "pp")
GROUP_KINDS = ("tp", "cp", "dp", "pp", "dp-cp", "tp-cp", "tp-pp", "tp-dp-cp", "ep", "edp", "tp-ep")


@dataclass(frozen=True)
class ParallelConfig:
    """Degrees of parallelism; world size = tp * cp * dp * pp. ep (expert parallel) must divide
    dp * cp: the expert grid reuses those ranks as ep x edp."""

    tp: int = 1
    cp: int = 1
    dp: int = 1
    pp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "cp", "dp", "pp", "ep"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ParallelConfig.{name} must be a positive int, got {value!r}")
        if (self.dp * self.cp) % self.ep != 0:
            raise ValueError(f"ep={self.ep} must divide dp * cp = {self.dp * self.cp}: "
                             "expert parallelism is carved out of the data- and context-parallel ranks")

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def edp(self) -> int:
        """Expert data-parallel size: the replicas of one expert shard."""
        return self.dp * self.cp // self.ep

    def sizes(self, order: tuple[str, ...]) -> list[int]:
        return [getattr(self, name) for name in order]


class RankCoords(NamedTuple):
    """A rank's coordinate along every dimension (decoder grid: tp, cp, dp, pp; expert grid: tp,
    ep, edp, pp; tp and pp are the same on both)."""

    tp: int
    cp: int
    dp: int
    pp: int
    ep: int
    edp: int


def _check_rank(cfg: ParallelConfig, rank: int) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < cfg.world_size:
        raise ValueError(f"rank must be an int in [0, {cfg.world_size}), got {rank!r}")


def rank_coords(cfg: ParallelConfig, rank: int) -> RankCoords:
    """The coordinates of global `rank` (0 <= rank < world size; else ValueError)."""
    raise NotImplementedError("s02.26: rank_coords")


def rank_of(cfg: ParallelConfig, *, tp: int = 0, cp: int = 0, dp: int = 0, pp: int = 0) -> int:
    """The global rank at decoder coordinates (tp, cp, dp, pp); ValueError when one is out of range."""
    raise NotImplementedError("s02.27: rank_of")


def group_ranks(cfg: ParallelConfig, kind: str) -> list[list[int]]:
    """Every group of `kind` (one of GROUP_KINDS): the sets of ranks whose coordinates differ only
    along the dimensions of `kind`. Each group's ranks ascend; groups are listed by their smallest
    rank (this is Megatron-Core's order). Together the groups partition range(world size)."""
    raise NotImplementedError("s02.28: group_ranks")


def build_groups(cfg: ParallelConfig) -> dict[str, dist.ProcessGroup]:
    """Create the process groups of every kind in GROUP_KINDS and return, for each kind, the group
    this rank belongs to. torch.distributed must be initialised with world size cfg.world_size
    (ValueError otherwise). Every rank must create every group, in the same order (new_group is a
    collective over the whole world, even for ranks outside the group)."""
    raise NotImplementedError("s02.29: build_groups")
