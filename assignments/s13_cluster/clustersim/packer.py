"""Pack MIG instance requests onto a few H200s, optimally.

Objective, exactly: place as many requests as possible (each request is one instance of its
profile, on one GPU, at an allowed start, every GPU's layout valid); among the packings that place
that many, use as few GPUs as possible (a GPU is used when it holds at least one instance), so
that the rest stay whole for whole-GPU jobs. Any packing optimal under both counts is accepted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from .mig import MigProfile, h200_profiles, is_valid_layout


@dataclass(frozen=True)
class PackResult:
    """placements: (request index, gpu, start) for each placed request, by request index;
    unplaced: the indices of the requests left out, ascending; gpus_used: GPUs holding an instance."""

    placements: tuple[tuple[int, int, int], ...]
    unplaced: tuple[int, ...]
    gpus_used: int


@cache
def _all_layouts(profile_list: tuple[MigProfile, ...]) -> list[tuple[tuple[str, int], ...]]:
    """Every valid layout of one GPU (depth-first over the (profile, start) pairs)."""
    profiles = {p.name: p for p in profile_list}
    pairs = [(p.name, s) for p in profiles.values() for s in p.starts]
    out = []

    def grow(i: int, layout: tuple) -> None:
        out.append(layout)
        for j in range(i, len(pairs)):
            bigger = (*layout, pairs[j])
            if is_valid_layout(bigger, profiles):
                grow(j + 1, bigger)

    grow(0, ())
    return out


def pack_mig(requests: Sequence[str], num_gpus: int, profiles: dict[str, MigProfile] | None = None) -> PackResult:
    """An optimal packing of `requests` (profile names) onto `num_gpus` GPUs (module objective).
    ValueError for an unknown profile or num_gpus < 0."""
    profiles = h200_profiles() if profiles is None else profiles
    raise NotImplementedError("s13.7: pack_mig")
