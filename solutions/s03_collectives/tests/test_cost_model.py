"""The alpha-beta cost model and nccl-tests' bandwidths, against formulas written out here (pure
Python, independent of the package), plus worked numbers a reader can check by hand."""

from __future__ import annotations

import math

import pytest
import torch
from collectives import (
    LinkModel,
    algbw,
    best_all_reduce,
    bus_factor,
    busbw,
    chunk_sizes,
    crossover_bytes,
    pairwise_all_to_all_time,
    recursive_doubling_steps,
    recursive_doubling_time,
    ring_all_gather_time,
    ring_all_reduce_time,
    ring_reduce_scatter_time,
)

# A 50 GB/s link with 5 us per message (NVLink-class bandwidth, a network-class latency).
ALPHA, BETA = 5e-6, 1 / 50e9
SIZES = [0, 1, 4096, 1 << 20, 3 * (1 << 20) + 7, 1 << 30]
WORLDS = [1, 2, 4, 8, 16]  # powers of two here; the hidden tests take the others


def rd_steps(n):  # log2 of the largest power of two <= n, + 2 for the fold when n is not one
    p = 2 ** int(math.log2(n))
    return int(math.log2(p)) + (0 if p == n else 2)


@pytest.mark.points(2)
def test_chunk_sizes_split_like_torch_tensor_split():
    for n in [0, 1, 2, 3, 4, 5, 7, 10, 1000, 1001, 1003]:
        for world in [1, 2, 3, 4, 5, 8]:
            want = [len(c) for c in torch.tensor_split(torch.arange(n), world)]
            assert chunk_sizes(n, world) == want, f"chunk_sizes({n}, {world})"
    with pytest.raises(ValueError):
        chunk_sizes(5, 0)
    with pytest.raises(ValueError):
        chunk_sizes(-1, 2)


@pytest.mark.points(1)
def test_message_time_is_alpha_plus_bytes_times_beta(tol):
    link = LinkModel(ALPHA, BETA)
    for s in SIZES:
        assert link.message_time(s) == pytest.approx(ALPHA + s * BETA, rel=tol("cost model")["rtol"])


@pytest.mark.points(2)
def test_ring_all_reduce_time_is_2_n_minus_1_steps_of_a_chunk(tol):
    link, rel = LinkModel(ALPHA, BETA), tol("cost model")["rtol"]
    for n in WORLDS:
        for s in SIZES:
            want = 2 * (n - 1) * (ALPHA + s / n * BETA)
            assert ring_all_reduce_time(s, n, link) == pytest.approx(want, rel=rel, abs=0), f"S={s}, n={n}"
    # worked: 1 MiB on 8 ranks: 14 steps of (5 us + 131072 B / 50 GB/s = 2.62144 us) = 106.70016 us
    assert ring_all_reduce_time(1 << 20, 8, link) == pytest.approx(106.70016e-6, rel=rel)


@pytest.mark.points(2)
def test_recursive_doubling_sends_the_whole_buffer_log2_n_times(tol):
    link, rel = LinkModel(ALPHA, BETA), tol("cost model")["rtol"]
    for n in WORLDS:
        assert recursive_doubling_steps(n) == rd_steps(n)
        for s in SIZES:
            want = rd_steps(n) * (ALPHA + s * BETA)
            assert recursive_doubling_time(s, n, link) == pytest.approx(want, rel=rel, abs=0), f"S={s}, n={n}"


@pytest.mark.points(2)
def test_all_gather_reduce_scatter_and_all_to_all_are_n_minus_1_steps(tol):
    link, rel = LinkModel(ALPHA, BETA), tol("cost model")["rtol"]
    for n in WORLDS:
        for s in SIZES:
            want = (n - 1) * (ALPHA + s / n * BETA)
            for fn in (ring_all_gather_time, ring_reduce_scatter_time, pairwise_all_to_all_time):
                assert fn(s, n, link) == pytest.approx(want, rel=rel, abs=0), f"{fn.__name__}: S={s}, n={n}"


@pytest.mark.points(2)
def test_crossover_equalizes_ring_and_recursive_doubling(tol):
    link, rel = LinkModel(ALPHA, BETA), tol("cost model")["rtol"]
    # n = 4: ring 6 alpha + 1.5 S beta, doubling 2 alpha + 2 S beta -> S* = 4 alpha / (0.5 beta) = 8 alpha / beta
    assert crossover_bytes(4, link) == pytest.approx(8 * ALPHA / BETA, rel=rel)  # 2.0e6 bytes
    for n in [4, 8, 16]:
        k = rd_steps(n)
        want = (2 * (n - 1) - k) * ALPHA / ((k - 2 * (n - 1) / n) * BETA)
        s_star = crossover_bytes(n, link)
        assert s_star == pytest.approx(want, rel=rel), f"n={n}"
        assert best_all_reduce(s_star / 2, n, link) == "recursive_doubling"
        assert best_all_reduce(s_star * 2, n, link) == "ring"
    # two ranks: both send S bytes in all, the ring in two messages: it never wins
    assert crossover_bytes(2, link) == math.inf
    assert best_all_reduce(1 << 30, 2, link) == "recursive_doubling"


@pytest.mark.points(2)
def test_bus_bandwidth_factors_are_nccl_tests(tol):
    for n in [1, 2, 3, 4, 8]:
        assert bus_factor("all_reduce", n) == pytest.approx(2 * (n - 1) / n, rel=1e-12, abs=0)
        for name in ("all_gather", "reduce_scatter", "all_to_all"):
            assert bus_factor(name, n) == pytest.approx((n - 1) / n, rel=1e-12, abs=0), name
    with pytest.raises(ValueError):
        bus_factor("broadcast_ring", 4)
    # worked: a 1 GiB all-reduce on 8 ranks in 10 ms: algbw = 107.37 GB/s, busbw = 7/4 of it = 187.90 GB/s
    rel = tol("cost model")["rtol"]
    assert algbw(1 << 30, 0.010) == pytest.approx(107.3741824e9, rel=rel)
    assert busbw("all_reduce", 1 << 30, 8, 0.010) == pytest.approx(187.9048192e9, rel=rel)
    # all-gather of 8 shards of 128 MiB (S = 1 GiB) in 10 ms: busbw = 7/8 of 107.37 = 93.95 GB/s
    assert busbw("all_gather", 1 << 30, 8, 0.010) == pytest.approx(93.9524096e9, rel=rel)


@pytest.mark.points(1)
def test_link_model_and_sizes_are_validated():
    # valid edges: no time on one rank (a function that always raises earns nothing)
    assert ring_all_reduce_time(1024, 1, LinkModel(ALPHA, BETA)) == 0 and algbw(1024, 2.0) == 512
    with pytest.raises(ValueError):
        LinkModel(-1e-6, BETA)
    with pytest.raises(ValueError):
        LinkModel(ALPHA, 0.0)
    with pytest.raises(ValueError):
        ring_all_reduce_time(-1, 4, LinkModel(ALPHA, BETA))
    with pytest.raises(ValueError):
        ring_all_reduce_time(1024, 0, LinkModel(ALPHA, BETA))
    with pytest.raises(ValueError):
        algbw(1024, 0.0)
