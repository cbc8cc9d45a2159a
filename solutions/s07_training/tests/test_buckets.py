"""Gradient buckets and ZeRO shard bounds, no ranks needed. Oracle for the buckets: torch's own
DDP bucketing, torch.distributed._compute_bucket_assignment_by_size, given the parameters in the
walking order (its `tensor_indices` names them by registration index). Oracle for the shards: the
rule of the handout, ceil(numel / world) elements per rank."""

from __future__ import annotations

import pytest
import torch
from checks import torch_buckets
from trainfw import bucket_assignment, shard_bounds

CASES = [  # (sizes in fp32 elements, cap in bytes)
    ([10, 20, 5, 30], 80),
    ([10, 20, 5, 30], 1),
    ([10, 20, 5, 30], 10_000),
    ([48, 3, 96, 16, 256, 16, 256, 16], 1000),
    ([7], 4),
]


@pytest.mark.points(3)
@pytest.mark.parametrize("numels,cap", CASES)
def test_buckets_in_reverse_registration_order_match_torch_ddp(numels, cap):
    order = list(range(len(numels) - 1, -1, -1))
    got = bucket_assignment([4 * n for n in numels], cap)
    assert got == torch_buckets(numels, cap, order), f"sizes {numels} fp32 elements, cap {cap} B: got {got}"


@pytest.mark.points(2)
def test_buckets_follow_a_given_ready_order():
    numels, cap, order = [48, 3, 96, 16, 256, 16], 500, [1, 0, 5, 4, 3, 2]
    got = bucket_assignment([4 * n for n in numels], cap, order)
    assert got == torch_buckets(numels, cap, order), f"order {order}: got {got}"


@pytest.mark.points(1)
def test_bucket_assignment_rejects_bad_input():
    assert bucket_assignment([4, 4], 4) == [[1], [0]]  # the valid case works
    for sizes, cap, order in [([4, 4], 0, None), ([4, -1], 8, None), ([4, 4], 8, [0, 0])]:
        with pytest.raises(ValueError):
            bucket_assignment(sizes, cap, order)


@pytest.mark.points(2)
def test_shard_bounds_give_ceil_sized_chunks():
    for numel in (0, 1, 7, 8, 707):
        for world in (1, 2, 3, 4):
            s = -(-numel // world)
            want = [(min(r * s, numel), min((r + 1) * s, numel)) for r in range(world)]
            got = [tuple(shard_bounds(numel, r, world)) for r in range(world)]
            assert got == want, f"{numel} elements over {world} ranks: got {got}, want {want}"
