"""The engine's communication: the TP group of this rank's stage, the PP group of its tp column, and
the five things that cross between ranks, each recorded on the rank's Timeline (kind, bytes, peer).

Every rank creates every group, in the same order (torch.distributed requires it). With tp == 1 or
pp == 1 the matching calls are skipped: TP=1, PP=1 runs without torch.distributed at all."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from .sharding import ParallelConfig
from .timeline import Timeline


def _nbytes(t: Tensor) -> int:
    return t.numel() * t.element_size()


class Comm:
    """rank, stage, tp_rank: where this process sits; tp_group / pp_group: its groups (None: the
    whole world, or no group when that dimension is 1)."""

    def __init__(self, cfg: ParallelConfig, timeline: Timeline) -> None:
        self.cfg, self.timeline = cfg, timeline
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.stage, self.tp_rank = cfg.coords(self.rank)
        self.tp_group = self._my_group([[cfg.rank_of(s, t) for t in range(cfg.tp)] for s in range(cfg.pp)])
        self.pp_group = self._my_group([[cfg.rank_of(s, t) for s in range(cfg.pp)] for t in range(cfg.tp)])

    def _my_group(self, groups: list[list[int]]):
        """This rank's group among `groups` (each rank creates all of them, in order); None when a
        group is the whole world (the default group) or a single rank (no communication)."""
        mine = None
        for ranks in groups:
            if len(ranks) in (1, self.cfg.world_size):
                continue
            group = dist.new_group(ranks)
            if self.rank in ranks:
                mine = group
        return mine

    @property
    def is_first(self) -> bool:
        return self.stage == 0

    @property
    def is_last(self) -> bool:
        return self.stage == self.cfg.pp - 1

    def all_reduce(self, x: Tensor, name: str) -> Tensor:
        """Sum of x over the TP group, in place (a row-parallel output, the vocab-parallel embedding),
        recorded as an "all_reduce" event named `name` with x's bytes."""
        if self.cfg.tp == 1:
            return x
        # BEGIN SOLUTION
        with self.timeline.span("all_reduce", name, _nbytes(x)):
            dist.all_reduce(x, group=self.tp_group)
        return x
        # END SOLUTION

    def all_gather_last(self, x: Tensor, name: str) -> Tensor:
        """(S, V / tp) on each TP rank -> (S, V), the shards in tp-rank order (the vocab-parallel LM head),
        recorded as an "all_gather" event named `name` with this rank's bytes."""
        if self.cfg.tp == 1:
            return x
        # BEGIN SOLUTION
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(self.cfg.tp)]
        with self.timeline.span("all_gather", name, _nbytes(x)):
            dist.all_gather(parts, x, group=self.tp_group)
        return torch.cat(parts, dim=-1)
        # END SOLUTION

    def send_next(self, x: Tensor) -> list:
        """Posts the send of this stage's output (T, hidden) to the same tp rank of the next stage with
        batch_isend_irecv, recorded as a "send" event (bytes, peer); returns the work handles to wait
        on (the caller must not change x until they complete)."""
        # BEGIN SOLUTION
        peer = self.cfg.rank_of(self.stage + 1, self.tp_rank)
        with self.timeline.span("send", "activations", _nbytes(x), peer):
            return dist.batch_isend_irecv([dist.P2POp(dist.isend, x, peer)])
        # END SOLUTION

    def post_recv(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> tuple[Tensor, list]:
        """Posts the receive of the previous stage's output of `shape`: (buffer, work handles)."""
        # BEGIN SOLUTION
        buf = torch.empty(shape, dtype=dtype, device=device)
        peer = self.cfg.rank_of(self.stage - 1, self.tp_rank)
        return buf, dist.batch_isend_irecv([dist.P2POp(dist.irecv, buf, peer)])
        # END SOLUTION

    def wait_recv(self, buf: Tensor, works: list) -> Tensor:
        """Waits for a posted receive (the span is the time this rank stood waiting)."""
        peer = self.cfg.rank_of(self.stage - 1, self.tp_rank)
        with self.timeline.span("recv", "activations", _nbytes(buf), peer):
            for w in works:
                w.wait()
        return buf

    def broadcast_tokens(self, tokens: list[int], count: int, device: torch.device) -> list[int]:
        """The last stage's sampled tokens to every stage of this tp column (count known everywhere),
        one broadcast in the pp group from the last stage, recorded as a "broadcast" event."""
        if self.cfg.pp == 1 or count == 0:
            return tokens
        # BEGIN SOLUTION
        buf = torch.tensor(tokens if self.is_last else [0] * count, dtype=torch.long, device=device)
        src = self.cfg.rank_of(self.cfg.pp - 1, self.tp_rank)
        with self.timeline.span("broadcast", "tokens", _nbytes(buf), src):
            dist.broadcast(buf, src=src, group=self.pp_group)
        return buf.tolist()
        # END SOLUTION
