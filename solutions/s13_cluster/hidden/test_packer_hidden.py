"""The MIG packer on random small instances against the brute force of tests/test_packer.py."""

from __future__ import annotations

import random

import pytest
from conftest import H200, PROPERTY_SETTINGS, check_packing
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.points(4)
@settings(PROPERTY_SETTINGS, max_examples=12)
@given(seed=st.integers(0, 100_000))
def test_random_packings_are_optimal(seed):
    rng = random.Random(seed)
    num_gpus = rng.choice([1, 2, 2, 3])
    n = rng.randint(1, 6 if num_gpus < 3 else 5)
    weights = {"1g.18gb": 3, "1g.18gb+me": 1, "1g.35gb": 2, "2g.35gb": 2, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1}
    requests = rng.choices(sorted(H200), weights=[weights[p] for p in sorted(H200)], k=n)
    check_packing(requests, num_gpus)


@pytest.mark.points(2)
def test_fewest_gpus_among_the_best_packings():
    # 4g at 0 and 3g at 4 share one GPU; a careless packer uses two
    check_packing(["4g.71gb", "3g.71gb"], 3)
    # 1g.35gb at 6 beside three 2g: one GPU for four instances
    check_packing(["2g.35gb", "1g.35gb", "2g.35gb", "2g.35gb"], 2)
    # 7 x 1g on one GPU, plus the +me on another (1g starts 0..6 are all taken)
    check_packing(["1g.18gb"] * 7 + ["1g.18gb+me"], 2)


@pytest.mark.points(1)
def test_a_layout_holding_none_of_what_is_left_does_not_end_the_search():
    # after one 4g, the remaining (4g, 3g) fit no layout of the 7g-only kind: the search must go on
    check_packing(["4g.71gb", "4g.71gb", "3g.71gb"], 2)
    check_packing(["1g.18gb", "1g.18gb+me", "1g.18gb+me"], 2)
