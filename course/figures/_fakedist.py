"""Run a reference's multi-rank code in one process: one thread per rank, and a stand-in for the
few `torch.distributed` calls the figures need (ranks, all_reduce, all_gather, isend/irecv), which
also logs every call. The figures use it to draw what the references really send, without
starting processes; the tests compare its results with plain single-process torch.

The stand-in replaces the `dist` global of the named reference modules while `run` executes and
puts the real one back afterwards. Nothing else of torch.distributed is faked.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

import torch

_LOCK = threading.Lock()  # one fake world at a time: the patched globals are process-wide


@dataclass(frozen=True)
class Call:
    """One logged call: which rank made it, in which phase (the driver's label), what and how big."""

    rank: int
    phase: str
    op: str
    shape: tuple[int, ...]
    peer: int | None = None
    values: tuple[float, ...] = ()  # what a send carried (figures send tiny tensors)


class _Handle:
    def __init__(self, wait: Callable[[], None] = lambda: None) -> None:
        self.wait = wait


class FakeDist:
    """The torch.distributed functions the references call, for `world` threads."""

    def __init__(self, world: int) -> None:
        if world < 1:
            raise ValueError(f"world must be >= 1, got {world}")
        self.world, self.phase = world, ""
        self.calls: list[Call] = []
        self._local = threading.local()
        self._barrier = threading.Barrier(world)
        self._slots: list[torch.Tensor | None] = [None] * world
        self._mail = {(s, d): queue.Queue() for s in range(world) for d in range(world)}
        self._log_lock = threading.Lock()

    # ranks -------------------------------------------------------------------------------------
    def get_rank(self, group=None) -> int:
        return self._local.rank

    def get_world_size(self, group=None) -> int:
        return self.world

    def _log(self, op: str, t: torch.Tensor, peer: int | None = None) -> None:
        values = tuple(t.detach().reshape(-1).tolist()) if op == "send" else ()
        with self._log_lock:
            self.calls.append(Call(self.get_rank(), self.phase, op, tuple(t.shape), peer, values))

    # collectives (every rank calls them in the same order) ---------------------------------------
    def _gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        self._slots[self.get_rank()] = t.detach().clone()
        self._barrier.wait()
        parts = list(self._slots)
        self._barrier.wait()  # nobody overwrites a slot before everyone has read it
        return parts

    def all_reduce(self, t: torch.Tensor, group=None, op=None) -> _Handle:
        self._log("all_reduce", t)
        parts = self._gather(t)
        t.copy_(torch.stack(parts).sum(0))  # the same summation order on every rank
        return _Handle()

    def all_gather(self, out: list[torch.Tensor], t: torch.Tensor, group=None) -> _Handle:
        self._log("all_gather", t)
        for dst, part in zip(out, self._gather(t)):
            dst.copy_(part)
        return _Handle()

    # point to point -------------------------------------------------------------------------------
    def isend(self, t: torch.Tensor, dst: int, group=None, tag: int = 0) -> _Handle:
        self._log("send", t, dst)
        self._mail[(self.get_rank(), dst)].put(t.detach().clone())
        return _Handle()

    def irecv(self, t: torch.Tensor, src: int, group=None, tag: int = 0) -> _Handle:
        me = self.get_rank()
        return _Handle(lambda: t.copy_(self._mail[(src, me)].get(timeout=30)))

    def send(self, t: torch.Tensor, dst: int, group=None, tag: int = 0) -> None:
        self.isend(t, dst)

    def recv(self, t: torch.Tensor, src: int, group=None, tag: int = 0) -> None:
        self.irecv(t, src).wait()


def run(world: int, modules: Sequence[ModuleType], fn: Callable[[FakeDist, int], object]) -> tuple[list, FakeDist]:
    """Call fn(fake, rank) on `world` threads with each module's `dist` replaced by the fake; returns
    (the results by rank, the fake with its call log). Re-raises the first rank's exception."""
    fake = FakeDist(world)
    results: list = [None] * world
    errors: list[BaseException] = []

    def body(rank: int) -> None:
        fake._local.rank = rank
        try:
            results[rank] = fn(fake, rank)
        except BaseException as e:  # noqa: BLE001 (handed to the caller below)
            errors.append(e)
            fake._barrier.abort()

    with _LOCK:
        saved = [(m, m.dist) for m in modules]
        for m in modules:
            m.dist = fake
        try:
            threads = [threading.Thread(target=body, args=(r,)) for r in range(world)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for m, original in saved:
                m.dist = original
    if errors:
        raise errors[0]
    return results, fake
