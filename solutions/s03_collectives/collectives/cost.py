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
        # BEGIN SOLUTION
        return self.alpha_s + nbytes * self.beta_s_per_byte
        # END SOLUTION


def check_size(nbytes: float, world: int) -> None:
    """ValueError unless nbytes >= 0 (finite) and world >= 1."""
    if not (math.isfinite(nbytes) and nbytes >= 0):
        raise ValueError(f"nbytes must be finite and >= 0, got {nbytes!r}")
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"world must be an int >= 1, got {world!r}")


def ring_all_reduce_time(nbytes: float, world: int, link: LinkModel) -> float:
    """Ring all-reduce of an S-byte buffer on n ranks: reduce-scatter then all-gather, 2(n-1) steps,
    each one message of S/n bytes: 2(n-1) * (alpha + S/n * beta). 0 for one rank."""
    # BEGIN SOLUTION
    check_size(nbytes, world)
    return 2 * (world - 1) * link.message_time(nbytes / world)
    # END SOLUTION


def recursive_doubling_steps(world: int) -> int:
    """Steps of recursive doubling on n ranks: log2(p) for p the largest power of two <= n, plus 2
    (the fold in and the copy back out) when n is not a power of two. 0 for one rank."""
    # BEGIN SOLUTION
    check_size(0, world)
    p = 1 << (world.bit_length() - 1)
    return (p.bit_length() - 1) + (2 if world != p else 0)
    # END SOLUTION


def recursive_doubling_time(nbytes: float, world: int, link: LinkModel) -> float:
    """Recursive doubling all-reduce of an S-byte buffer: every step is one message of the whole S
    bytes: recursive_doubling_steps(n) * (alpha + S * beta)."""
    # BEGIN SOLUTION
    check_size(nbytes, world)
    return recursive_doubling_steps(world) * link.message_time(nbytes)
    # END SOLUTION


def ring_all_gather_time(nbytes: float, world: int, link: LinkModel) -> float:
    """Ring all-gather with S the whole gathered output: n-1 steps of S/n bytes."""
    # BEGIN SOLUTION
    check_size(nbytes, world)
    return (world - 1) * link.message_time(nbytes / world)
    # END SOLUTION


def ring_reduce_scatter_time(nbytes: float, world: int, link: LinkModel) -> float:
    """Ring reduce-scatter with S one rank's whole input: n-1 steps of S/n bytes."""
    # BEGIN SOLUTION
    check_size(nbytes, world)
    return (world - 1) * link.message_time(nbytes / world)
    # END SOLUTION


def pairwise_all_to_all_time(nbytes: float, world: int, link: LinkModel) -> float:
    """Pairwise all-to-all with S all that one rank sends (its own block included), in equal blocks:
    n-1 steps of S/n bytes (the own block is a local copy, free in this model)."""
    # BEGIN SOLUTION
    check_size(nbytes, world)
    return (world - 1) * link.message_time(nbytes / world)
    # END SOLUTION


def crossover_bytes(world: int, link: LinkModel) -> float:
    """The message size S at which the ring all-reduce becomes as fast as recursive doubling
    (ring_all_reduce_time == recursive_doubling_time); recursive doubling is faster below it, the
    ring above. math.inf when the ring is never faster (n = 2: both send S bytes, the ring in two
    messages). ValueError for world < 2."""
    # BEGIN SOLUTION
    check_size(0, world)
    if world < 2:
        raise ValueError(f"crossover_bytes: needs world >= 2, got {world}")
    steps = recursive_doubling_steps(world)
    latency_gap = (2 * (world - 1) - steps) * link.alpha_s  # the ring's extra messages
    bandwidth_gap = (steps - 2 * (world - 1) / world) * link.beta_s_per_byte  # rd's extra bytes, per byte of S
    if bandwidth_gap <= 0.0:
        return math.inf
    return latency_gap / bandwidth_gap
    # END SOLUTION


def best_all_reduce(nbytes: float, world: int, link: LinkModel) -> str:
    """"recursive_doubling" when the model makes it strictly faster for this message, else "ring"."""
    # BEGIN SOLUTION
    faster = recursive_doubling_time(nbytes, world, link) < ring_all_reduce_time(nbytes, world, link)
    return "recursive_doubling" if faster else "ring"
    # END SOLUTION


def bus_factor(collective: str, world: int) -> float:
    """busbw / algbw of a collective (one of COLLECTIVES) on n ranks: 2(n-1)/n for all_reduce,
    (n-1)/n for all_gather, reduce_scatter and all_to_all. ValueError for another name."""
    # BEGIN SOLUTION
    check_size(0, world)
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}; known: {COLLECTIVES}")
    per_rank = (world - 1) / world
    return 2 * per_rank if collective == "all_reduce" else per_rank
    # END SOLUTION


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth in bytes/s: S / t. ValueError unless seconds > 0."""
    # BEGIN SOLUTION
    check_size(nbytes, 1)
    if not (math.isfinite(seconds) and seconds > 0.0):
        raise ValueError(f"seconds must be finite and > 0, got {seconds!r}")
    return nbytes / seconds
    # END SOLUTION


def busbw(collective: str, nbytes: float, world: int, seconds: float) -> float:
    """Bus bandwidth in bytes/s, as nccl-tests reports it: algbw(S, t) * bus_factor(collective, n)."""
    # BEGIN SOLUTION
    return algbw(nbytes, seconds) * bus_factor(collective, world)
    # END SOLUTION
