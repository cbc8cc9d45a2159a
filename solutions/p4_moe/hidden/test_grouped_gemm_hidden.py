"""More grouped GEMM cases (Triton's interpreter on the CPU): 9 experts (a count past a power of
two), every row in the last expert, int32 offsets, other tile sizes, K smaller than a tile, a
strided activation view, and no rows at all."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from epmoe import experts_grouped, grouped_gemm, grouped_swiglu

from autograder.testing import in_worker


def case(counts: list[int], n: int, k: int, seed: int, dtype=torch.int64):
    g = torch.Generator().manual_seed(seed)
    offsets = torch.tensor([0, *torch.tensor(counts).cumsum(0).tolist()], dtype=dtype)
    return torch.randn(sum(counts), k, generator=g), offsets, torch.randn(len(counts), n, k, generator=g)


def reference(x, offsets, w):
    o = offsets.tolist()
    return torch.cat([x[o[e]:o[e + 1]] @ w[e].T for e in range(w.shape[0])])


@pytest.mark.points(2)
@pytest.mark.parametrize("counts, n, k, tiles", [
    ([3, 0, 17, 1, 0, 40, 2, 9, 5], 24, 40, {}),
    ([0, 0, 0, 66], 33, 20, {"block_m": 16, "block_n": 32, "block_k": 16}),
    ([5, 6], 10, 7, {"block_m": 32, "block_n": 16, "block_k": 16}),
], ids=["nine-experts", "last-expert-only", "k-below-tile"])
def test_more_shapes_and_tiles(counts, n, k, tiles, device, tol):
    x, offsets, w = case(counts, n, k, seed=len(counts) + n)
    got = grouped_gemm(x.to(device), offsets.to(device), w.to(device), **tiles).cpu()
    torch.testing.assert_close(got, reference(x, offsets, w), **tol("grouped GEMM, fp32"),
                               msg=lambda m: f"rows per expert {counts}, N={n}, K={k}, tiles {tiles}: {m}")


def test_int32_offsets(device, tol):
    x, offsets, w = case([4, 0, 9], 16, 16, seed=3, dtype=torch.int32)
    got = grouped_gemm(x.to(device), offsets.to(device), w.to(device)).cpu()
    torch.testing.assert_close(got, reference(x, offsets, w), **tol("grouped GEMM, fp32"))


@in_worker
def gemm_of_a_view(base, offsets, w):
    """In the worker: x as every other column of base (a strided view), then the grouped GEMM."""
    return grouped_gemm(base[:, ::2], offsets, w)


def test_strided_activations(device, tol):
    x, offsets, w = case([6, 2, 11], 12, 24, seed=4)
    base = torch.stack([x, torch.full_like(x, float("nan"))], dim=-1).flatten(-2)  # NaN in the skipped columns
    got = gemm_of_a_view(base.to(device), offsets.to(device), w.to(device)).cpu()
    torch.testing.assert_close(got, reference(x, offsets, w), **tol("grouped GEMM, fp32"),
                               msg=lambda m: f"x (19, 24) with stride (48, 2): {m}")


@pytest.mark.kernels()  # no rows: nothing to launch
def test_no_rows(device):
    _, offsets, w = case([0, 0], 8, 8, seed=5)
    got = grouped_swiglu(torch.zeros(0, 8, device=device), offsets.to(device), w.to(device), w.to(device),
                         torch.zeros(2, 8, 8, device=device))
    assert tuple(got.shape) == (0, 8)


@pytest.mark.points(2)
def test_experts_grouped_unsorts_its_rows(device, tol):
    g = torch.Generator().manual_seed(6)
    slots = torch.tensor([2, 0, 2, 1, 0, 2, 2, 1, 0, 3, 2])
    rows = torch.randn(len(slots), 8, generator=g)
    gate, up, down = torch.randn(4, 6, 8, generator=g), torch.randn(4, 6, 8, generator=g), torch.randn(4, 8, 6, generator=g)
    got = experts_grouped(*(t.to(device) for t in (rows, slots, gate, up, down))).cpu()
    want = torch.stack([(F.silu(r @ gate[s].T) * (r @ up[s].T)) @ down[s].T for r, s in zip(rows, slots.tolist())])
    torch.testing.assert_close(got, want, **tol("grouped GEMM, fp32"),
                               msg=lambda m: f"rows in dispatch's order, slots {slots.tolist()}: {m}")
