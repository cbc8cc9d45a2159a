"""The cost model off the powers of two, at one rank and at zero bytes, against formulas written
out here (pure Python)."""

from __future__ import annotations

import math

import pytest
from collectives import (
    LinkModel,
    best_all_reduce,
    busbw,
    crossover_bytes,
    pairwise_all_to_all_time,
    recursive_doubling_steps,
    recursive_doubling_time,
    ring_all_gather_time,
    ring_all_reduce_time,
    ring_reduce_scatter_time,
)

ALPHA, BETA = 2e-6, 1 / 25e9  # 2 us, 25 GB/s
LINK = LinkModel(ALPHA, BETA)


def rd_steps(n):
    p = 1
    while p * 2 <= n:
        p *= 2
    return round(math.log2(p)) + (2 if p != n else 0)


@pytest.mark.points(2)
def test_recursive_doubling_folds_worlds_that_are_not_powers_of_two(tol):
    rel = tol("cost model")["rtol"]
    assert [recursive_doubling_steps(n) for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 12)] == [0, 1, 3, 2, 4, 4, 4, 3, 5, 5]
    for n in range(1, 18):
        assert recursive_doubling_steps(n) == rd_steps(n), f"n={n}"
        for s in (0, 1000, 1 << 24):
            want = rd_steps(n) * (ALPHA + s * BETA)
            assert recursive_doubling_time(s, n, LINK) == pytest.approx(want, rel=rel, abs=0), f"S={s}, n={n}"


@pytest.mark.points(1)
def test_one_rank_costs_nothing_and_zero_bytes_cost_latency_only(tol):
    rel = tol("cost model")["rtol"]
    for fn in (ring_all_reduce_time, recursive_doubling_time, ring_all_gather_time, ring_reduce_scatter_time,
               pairwise_all_to_all_time):
        assert fn(1 << 20, 1, LINK) == 0.0, fn.__name__
    for n in (2, 3, 5, 6):
        assert ring_all_reduce_time(0, n, LINK) == pytest.approx(2 * (n - 1) * ALPHA, rel=rel)
        assert recursive_doubling_time(0, n, LINK) == pytest.approx(rd_steps(n) * ALPHA, rel=rel)
        for fn in (ring_all_gather_time, ring_reduce_scatter_time, pairwise_all_to_all_time):
            assert fn(0, n, LINK) == pytest.approx((n - 1) * ALPHA, rel=rel), fn.__name__
        for fn in (ring_all_gather_time, ring_reduce_scatter_time, pairwise_all_to_all_time):
            assert fn(999, n, LINK) == pytest.approx((n - 1) * (ALPHA + 999 / n * BETA), rel=rel), fn.__name__
    # nothing is faster than nothing: one rank keeps the ring (the model's "strictly faster" rule)
    assert best_all_reduce(1 << 20, 1, LINK) == "ring" and best_all_reduce(0, 1, LINK) == "ring"


@pytest.mark.points(2)
def test_crossover_off_the_powers_of_two(tol):
    rel = tol("cost model")["rtol"]
    # n = 3: ring 4 alpha + 4/3 S beta, doubling with the fold 3 alpha + 3 S beta -> S* = 0.6 alpha / beta
    assert crossover_bytes(3, LINK) == pytest.approx(0.6 * ALPHA / BETA, rel=rel)  # 30 kB
    for n in (3, 5, 6, 7, 12, 32):
        k = rd_steps(n)
        want = (2 * (n - 1) - k) * ALPHA / ((k - 2 * (n - 1) / n) * BETA)
        s_star = crossover_bytes(n, LINK)
        assert s_star == pytest.approx(want, rel=rel), f"n={n}"
        assert ring_all_reduce_time(s_star, n, LINK) == pytest.approx(recursive_doubling_time(s_star, n, LINK),
                                                                       rel=1e-9)
        assert best_all_reduce(0.9 * s_star, n, LINK) == "recursive_doubling", f"n={n}"
        assert best_all_reduce(1.1 * s_star, n, LINK) == "ring", f"n={n}"
    assert crossover_bytes(6, LinkModel(0.0, BETA)) == 0.0  # no latency: the ring's fewer bytes always win
    with pytest.raises(ValueError):
        crossover_bytes(1, LINK)


@pytest.mark.points(1)
def test_bus_bandwidth_of_every_collective_and_world(tol):
    rel = tol("cost model")["rtol"]
    s, t = 3 * (1 << 20), 1.7e-3
    for n in range(1, 10):
        assert busbw("all_reduce", s, n, t) == pytest.approx(s / t * 2 * (n - 1) / n, rel=rel, abs=0), f"n={n}"
        for name in ("all_gather", "reduce_scatter", "all_to_all"):
            assert busbw(name, s, n, t) == pytest.approx(s / t * (n - 1) / n, rel=rel, abs=0), f"{name}, n={n}"
