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
    # BEGIN SOLUTION
    if not isinstance(num_gpus, int) or num_gpus < 0:
        raise ValueError(f"num_gpus must be an int >= 0, got {num_gpus!r}")
    for name in requests:
        if name not in profiles:
            raise ValueError(f"unknown MIG profile {name!r}")
    names = sorted(set(requests))
    # Each GPU's best use is a maximal multiset of instances (any part of a valid layout is valid).
    shapes: dict[tuple[int, ...], tuple] = {}
    for layout in _all_layouts(tuple(profiles.values())):
        c = Counter(name for name, _ in layout)
        key = tuple(c[n] for n in names)
        if any(key) and key not in shapes:
            shapes[key] = layout
    maximal = [k for k in shapes if not any(o != k and all(a <= b for a, b in zip(k, o)) for o in shapes)]
    want = tuple(Counter(requests)[n] for n in names)

    @cache
    def best(left: tuple[int, ...], gpus: int) -> tuple[int, int, tuple]:
        """(placed, -gpus used, chosen shapes) from remaining counts `left` with `gpus` GPUs."""
        result = (0, 0, ())
        if gpus == 0 or not any(left):
            return result
        for shape in maximal:
            take = tuple(min(a, b) for a, b in zip(left, shape))
            if not any(take):
                continue
            placed, neg_used, chosen = best(tuple(a - b for a, b in zip(left, take)), gpus - 1)
            cand = (placed + sum(take), neg_used - 1, (shape, *chosen))
            if cand[:2] > result[:2]:
                result = cand
        return result

    _, neg_used, chosen = best(want, num_gpus)
    todo = {n: [i for i, r in enumerate(requests) if r == n] for n in names}
    placements = []
    for gpu, shape in enumerate(chosen):
        for name, start in shapes[shape]:
            if todo.get(name):
                placements.append((todo[name].pop(0), gpu, start))
    placed = {i for i, _, _ in placements}
    return PackResult(tuple(sorted(placements)), tuple(i for i in range(len(requests)) if i not in placed), -neg_used)
    # END SOLUTION
