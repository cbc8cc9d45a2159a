"""Buckets on more shapes than the public cases, against torch's own DDP bucketing: a bucket that
reaches the cap exactly closes there, empty parameters, random sizes and orders."""

from __future__ import annotations

import random

import pytest
from checks import torch_buckets
from trainfw import bucket_assignment


@pytest.mark.points(2)
def test_bucket_that_reaches_the_cap_exactly_closes():
    numels, cap = [4, 4, 4], 32  # 16 B each: two reach 32 B exactly
    want = torch_buckets(numels, cap, [2, 1, 0])
    got = bucket_assignment([4 * n for n in numels], cap)
    assert got == want, f"sizes {numels} fp32 elements, cap {cap} B: got {got}, want {want}"


@pytest.mark.points(3)
def test_random_sizes_and_orders_match_torch_ddp():
    rng = random.Random(20260)
    for trial in range(60):
        n = rng.randint(1, 12)
        numels = [rng.choice([0, 1, 3, 16, 100, 257]) for _ in range(n)]
        cap = rng.choice([1, 33, 64, 65, 400, 401, 1024, 1025, 5000])  # caps 1 byte past a multiple of 4 too
        order = list(range(n))
        rng.shuffle(order)
        for walk in (None, order):
            want = torch_buckets(numels, cap, list(range(n - 1, -1, -1)) if walk is None else walk)
            got = bucket_assignment([4 * k for k in numels], cap, walk)
            assert got == want, f"trial {trial}: sizes {numels}, cap {cap} B, order {walk}: got {got}, want {want}"
