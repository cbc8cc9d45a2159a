"""Model-based test of the MIG packer on instances too large for brute force (up to 11 requests on
up to 4 GPUs): the optimum comes from a dynamic programme written here over the multisets of
instances one GPU can hold (any sub-multiset of a valid layout is valid), and every placement is
checked against the test's own H200 table. Hypothesis shrinks a failure to a short request list.

Budget: a fixed seed and a small example count in CI; AUTOGRADER_HYPOTHESIS_PROFILE=thorough runs
ten times as many examples.
"""

from __future__ import annotations

import os
from collections import Counter
from functools import cache

import pytest
from conftest import H200, all_valid_layouts, oracle_valid, packed
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

SCALE = 10 if os.environ.get("AUTOGRADER_HYPOTHESIS_PROFILE") == "thorough" else 1
PROFILES = sorted(H200)


@cache
def gpu_multisets() -> tuple[tuple[int, ...], ...]:
    """Every non-empty multiset of instances one GPU can hold, as counts per PROFILES entry."""
    return tuple(sorted({tuple(Counter(p for p, _ in layout)[q] for q in PROFILES)
                         for layout in all_valid_layouts() if layout}))


@cache
def optimum(left: tuple[int, ...], gpus: int) -> tuple[int, int]:
    """(most requests placed, fewest GPUs used for that many) from counts `left` on `gpus` GPUs:
    give the next GPU any multiset it can hold that the requests supply, or stop."""
    best = (0, 0)
    if gpus == 0:
        return best
    for shape in gpu_multisets():
        if all(a <= b for a, b in zip(shape, left)):
            placed, used = optimum(tuple(b - a for a, b in zip(shape, left)), gpus - 1)
            if (placed + sum(shape), -(used + 1)) > (best[0], -best[1]):
                best = (placed + sum(shape), used + 1)
    return best


def check_against_model(requests: list[str], num_gpus: int) -> None:
    case = f"pack_mig({requests}, {num_gpus})"
    placements, unplaced, gpus_used = packed(requests, num_gpus)
    idx = [p[0] for p in placements]
    assert idx == sorted(set(idx)), f"{case}: placements must be one per request, by request index: {placements}"
    assert sorted(idx + list(unplaced)) == list(range(len(requests))), \
        f"{case}: placed {idx} and unplaced {unplaced} must split the request indices"
    layouts: dict[int, list] = {}
    for i, gpu, start in placements:
        assert 0 <= gpu < num_gpus, f"{case}: request {i} on GPU {gpu}, outside 0..{num_gpus - 1}"
        layouts.setdefault(gpu, []).append((requests[i], start))
    for gpu, layout in sorted(layouts.items()):
        assert oracle_valid(layout), f"{case}: GPU {gpu} holds an invalid layout {sorted(layout)}"
    assert gpus_used == len(layouts), f"{case}: gpus_used = {gpus_used} but {len(layouts)} GPUs hold instances"
    want = optimum(tuple(Counter(requests)[p] for p in PROFILES), num_gpus)
    assert (len(placements), gpus_used) == want, \
        f"{case}: placed {len(placements)} on {gpus_used} GPUs; the optimum places {want[0]} on {want[1]}"


# pairing matters: each 4g goes with a 3g (slices 0-3 and 4-7), the three 2g with the 1g.35gb at 6
PAIRING = ["4g.71gb", "3g.71gb", "4g.71gb", "3g.71gb", "2g.35gb", "2g.35gb", "2g.35gb", "1g.35gb", "1g.18gb",
           "1g.18gb+me"]


@pytest.mark.points(3)
@settings(max_examples=20 * SCALE, derandomize=True, database=None, deadline=None,
          phases=[Phase.explicit, Phase.generate, Phase.shrink],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(requests=st.lists(st.sampled_from(PROFILES), min_size=1, max_size=11), num_gpus=st.integers(1, 4))
@example(requests=PAIRING, num_gpus=3)
@example(requests=["3g.71gb", "4g.71gb", "1g.18gb", "4g.71gb"], num_gpus=2)  # the 1g must go beside a 4g, not a 3g
def test_packings_are_optimal_against_the_model(requests, num_gpus):
    check_against_model(requests, num_gpus)
