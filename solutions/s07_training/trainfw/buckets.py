"""Gradient buckets: which parameters' gradients travel in one all-reduce.

DDP packs gradients into buckets of about `cap_bytes` so that one all-reduce carries many small
tensors (one launch, one latency) and can start while the backward pass still computes the rest.
Parameters are walked in an *order*; a bucket takes parameters until its size reaches the cap (the
parameter that crosses the cap is the bucket's last one: a bucket may exceed the cap, and a
parameter larger than the cap is a bucket of its own). The first step walks them in reverse
registration order, a guess at the order in which backward makes their gradients ready (the last
layer's first); after the first step DDP rebuilds the buckets in the order it observed.
"""

from __future__ import annotations

from collections.abc import Sequence


def bucket_assignment(sizes_bytes: Sequence[int], cap_bytes: int,
                      order: Sequence[int] | None = None) -> list[list[int]]:
    """Buckets of parameter indices (each in walking order), the first bucket first.

    sizes_bytes[i]: bytes of parameter i's gradient (registration order).
    order: the walking order, a permutation of range(len(sizes_bytes)); None is reverse
    registration order (n-1, ..., 0), DDP's first-step guess.
    ValueError for a cap below 1, a negative size, or an order that is not a permutation."""
    n = len(sizes_bytes)
    if isinstance(cap_bytes, bool) or not isinstance(cap_bytes, int) or cap_bytes < 1:
        raise ValueError(f"bucket_assignment: cap_bytes must be an int >= 1, got {cap_bytes!r}")
    if any(s < 0 for s in sizes_bytes):
        raise ValueError(f"bucket_assignment: sizes must be >= 0, got {list(sizes_bytes)}")
    walk = list(range(n - 1, -1, -1)) if order is None else list(order)
    if sorted(walk) != list(range(n)):
        raise ValueError(f"bucket_assignment: order {walk} is not a permutation of range({n})")
    # BEGIN SOLUTION
    buckets: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for i in walk:
        current.append(i)
        filled += sizes_bytes[i]
        if filled >= cap_bytes:  # the parameter that reaches the cap closes the bucket
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets
    # END SOLUTION
