"""The alpha-beta cost model of the collectives, and bandwidths as nccl-tests report them.

A message of m bytes over one link takes alpha + m * beta seconds (alpha: latency per message;
beta: seconds per byte, 1 / link bandwidth). S ("nbytes") is the size nccl-tests gives each
collective (doc/PERFORMANCE.md of NVIDIA/nccl-tests):
- all-reduce: the buffer being reduced (the same on every rank);
- all-gather: the whole gathered output (n shards);
- reduce-scatter: the whole input of one rank (n blocks);
- all-to-all: everything one rank sends (n blocks, its own included).
Algorithm bandwidth algbw = S / t; bus bandwidth busbw = algbw * factor, with factor 2(n-1)/n for
all-reduce and (n-1)/n for the other three: the bytes each rank's link must carry per byte of S,
so busbw compares with the link's own bandwidth whatever n is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


@dataclass(frozen=True)
class LinkModel:
    """One link in the alpha-beta (Hockney) model. alpha_s: seconds per message (>= 0);
    beta_s_per_byte: seconds per byte (> 0), the inverse of the link's bandwidth."""

    alpha_s: float
    beta_s_per_byte: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.alpha_s) and self.alpha_s >= 0.0):
            raise ValueError(f"LinkModel.alpha_s must be finite and >= 0, got {self.alpha_s!r}")
        if not (math.isfinite(self.beta_s_per_byte) and self.beta_s_per_byte > 0.0):
            raise ValueError(f"LinkModel.beta_s_per_byte must be finite and > 0, got {self.beta_s_per_byte!r}")

    @classmethod
    def from_bandwidth(cls, alpha_s: float, bytes_per_s: float) -> LinkModel:
        """A link of `bytes_per_s` bandwidth (e.g. 50e9 for 50 GB/s) and `alpha_s` latency."""
        if not bytes_per_s > 0.0:
            raise ValueError(f"bytes_per_s must be > 0, got {bytes_per_s!r}")
        return cls(alpha_s, 1.0 / bytes_per_s)

    def message_time(self, nbytes: float) -> float:
        """Seconds to send one message of nbytes bytes: alpha + nbytes * beta."""
        raise NotImplementedError("s03.2: LinkModel.message_time")


def check_size(nbytes: float, world: int) -> None:
    """ValueError unless nbytes >= 0 (finite) and world >= 1."""
    if not (math.isfinite(nbytes) and nbytes >= 0):
        raise ValueError(f"nbytes must be finite and >= 0, got {nbytes!r}")
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"world must be an int >= 1, got {world!r}")


def ring_all_reduce_time(nbytes: float, world: int, link: LinkModel) -> float:
    """Ring all-reduce of an S-byte buffer on n ranks: reduce-scatter then all-gather, 2(n-1) steps,
    each one message of S/n bytes: 2(n-1) * (alpha + S/n * beta). 0 for one rank."""
    raise NotImplementedError("s03.3: ring_all_reduce_time")


def recursive_doubling_steps(world: int) -> int:
    """Steps of recursive doubling on n ranks: log2(p) for p the largest power of two <= n, plus 2
    (the fold in and the copy back out) when n is not a power of two. 0 for one rank."""
    raise NotImplementedError("s03.4: recursive_doubling_steps")


def recursive_doubling_time(nbytes: float, world: int, link: LinkModel) -> float:
    """Recursive doubling all-reduce of an S-byte buffer: every step is one message of the whole S
    bytes: recursive_doubling_steps(n) * (alpha + S * beta)."""
    raise NotImplementedError("s03.5: recursive_doubling_time")


def ring_all_gather_time(nbytes: float, world: int, link: LinkModel) -> float:
    """Ring all-gather with S the whole gathered output: n-1 steps of S/n bytes."""
    raise NotImplementedError("s03.6: ring_all_gather_time")


def ring_reduce_scatter_time(nbytes: float, world: int, link: LinkModel) -> float:
    """Ring reduce-scatter with S one rank's whole input: n-1 steps of S/n bytes."""
    raise NotImplementedError("s03.7: ring_reduce_scatter_time")


def pairwise_all_to_all_time(nbytes: float, world: int, link: LinkModel) -> float:
    """Pairwise all-to-all with S all that one rank sends (its own block included), in equal blocks:
    n-1 steps of S/n bytes (the own block is a local copy, free in this model)."""
    raise NotImplementedError("s03.8: pairwise_all_to_all_time")


def crossover_bytes(world: int, link: LinkModel) -> float:
    """The message size S at which the ring all-reduce becomes as fast as recursive doubling
    (ring_all_reduce_time == recursive_doubling_time); recursive doubling is faster below it, the
    ring above. math.inf when the ring is never faster (n = 2: both send S bytes, the ring in two
    messages). ValueError for world < 2."""
    raise NotImplementedError("s03.9: crossover_bytes")


def best_all_reduce(nbytes: float, world: int, link: LinkModel) -> str:
    """"recursive_doubling" when the model makes it strictly faster for this message, else "ring"."""
    raise NotImplementedError("s03.10: best_all_reduce")


def bus_factor(collective: str, world: int) -> float:
    """busbw / algbw of a collective (one of COLLECTIVES) on n ranks: 2(n-1)/n for all_reduce,
    (n-1)/n for all_gather, reduce_scatter and all_to_all. ValueError for another name."""
    raise NotImplementedError("s03.11: bus_factor")


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth in bytes/s: S / t. ValueError unless seconds > 0."""
    raise NotImplementedError("s03.12: algbw")


def busbw(collective: str, nbytes: float, world: int, seconds: float) -> float:
    """Bus bandwidth in bytes/s, as nccl-tests reports it: algbw(S, t) * bus_factor(collective, n)."""
    raise NotImplementedError("s03.13: busbw")
