"""Paged decode and its merge on strided views of every input: the answer must equal the one for
contiguous copies of the same values.

Real callers pass views: q sliced out of a fused QKV projection (B, H + 2 Hkv, D) or laid out
head-major (H, B, D) and transposed; caches that are every other head of a larger pool; block
tables that are a column slice of a wider table or a transposed one; context lengths that are a
column of a per-sequence metadata tensor. Only unit stride in head_dim is promised (q and the
caches), and unit stride in the last dim of partial and lse.

A tensor crosses between the judge and the worker as a contiguous copy, so each view is taken in
the worker (the `in_worker` functions) from a base tensor the judge built; the oracle is float64
attention over the contiguous values (`paged.oracle`, conftest.py).
"""

import pytest
import torch
from tritonkernels import combine_splits, paged_decode

from autograder.testing import in_worker

SCALE, SPLIT = 0.3, 16


def _case(paged, device):
    # 2 sequences (one spans 3 splits), 4 query heads over 2 KV heads, head_dim 32
    return paged.case(21, [37, 12], device=device)


def _q_views(q: torch.Tensor) -> dict[str, torch.Tensor]:
    """Bases (built in the judge) from which the worker cuts a view equal to q."""
    b, _, d = q.shape
    fused = torch.cat([q, torch.full((b, 2 * 2, d), float("nan"), dtype=q.dtype, device=q.device)], dim=1)
    return {"fused_qkv": fused, "head_major": q.transpose(0, 1).contiguous()}


@in_worker
def decode_with_q_view(base, how, heads, k, v, tables, lens, scale, split):
    """q as a view: the first `heads` heads of a fused QKV row (stride(0) = (H + 2 Hkv) * D), or a
    head-major (H, B, D) tensor transposed (stride (D, B * D, 1))."""
    q = base[:, :heads] if how == "fused_qkv" else base.transpose(0, 1)
    return paged_decode(q, k, v, tables, lens, scale, split)


@pytest.mark.points(2)
@pytest.mark.parametrize("how", ["fused_qkv", "head_major"])
def test_paged_decode_of_a_strided_q_view(how, paged, device, tol):
    q, k, v, tables, lens = _case(paged, device)
    out = decode_with_q_view(_q_views(q)[how], how, q.shape[1], k, v, tables, lens, SCALE, SPLIT)
    expected, _ = paged.oracle(q, k, v, tables, lens, SCALE)
    assert out.shape == q.shape, f"q view ({how}): output shape {tuple(out.shape)}, expected {tuple(q.shape)}"
    torch.testing.assert_close(out.cpu().double(), expected, **tol("paged decode, fp32"),
                               msg=lambda m: f"q given as a strided view ({how}), not a contiguous tensor:\n{m}")


@in_worker
def decode_with_head_sliced_caches(q, k_pool, v_pool, tables, lens, scale, split):
    """Caches that are the odd KV heads of a pool with twice as many (stride(2) = 2 * D)."""
    return paged_decode(q, k_pool[:, :, 1::2], v_pool[:, :, 1::2], tables, lens, scale, split)


@pytest.mark.points(1)
def test_paged_decode_of_caches_that_are_every_other_head(paged, device, tol):
    q, k, v, tables, lens = _case(paged, device)
    k_pool, v_pool = (torch.stack([torch.full_like(c, float("nan")), c], dim=3).flatten(2, 3) for c in (k, v))
    out = decode_with_head_sliced_caches(q, k_pool, v_pool, tables, lens, SCALE, SPLIT)
    expected, _ = paged.oracle(q, k, v, tables, lens, SCALE)
    torch.testing.assert_close(out.cpu().double(), expected, **tol("paged decode, fp32"),
                               msg=lambda m: f"caches given as every other KV head of a larger pool:\n{m}")


@in_worker
def decode_with_metadata_views(q, k, v, wide_tables_t, lens_cols, scale, split):
    """block_tables: the first max_blocks rows of a (max_blocks + 2, B) table, transposed (stride
    (1, B)); context_lens: column 1 of a (B, 3) int32 metadata tensor (stride 3)."""
    tables = wide_tables_t[: wide_tables_t.shape[0] - 2].t()
    return paged_decode(q, k, v, tables, lens_cols[:, 1], scale, split)


@pytest.mark.points(1)
def test_paged_decode_of_strided_block_tables_and_context_lens(paged, device, tol):
    q, k, v, tables, lens = _case(paged, device)
    spare = torch.full((2, tables.shape[0]), 10**6, dtype=torch.int32, device=device)  # never read
    wide_tables_t = torch.cat([tables.t(), spare]).contiguous()
    lens_cols = torch.stack([lens + 1000, lens, lens * 0 - 1], dim=1).contiguous()
    out = decode_with_metadata_views(q, k, v, wide_tables_t, lens_cols, SCALE, SPLIT)
    expected, _ = paged.oracle(q, k, v, tables, lens, SCALE)
    torch.testing.assert_close(out.cpu().double(), expected, **tol("paged decode, fp32"),
                               msg=lambda m: "block_tables (a transposed slice) and context_lens (a column of a "
                                             f"(B, 3) tensor) given as strided views:\n{m}")


@in_worker
def combine_views(partial_wide, lse_wide):
    """partial (B, H, S, D) as splits 1..S of a (B, S + 2, H, D) tensor transposed; lse (B, H, S) as
    columns 1..S of (B, H, S + 2)."""
    s = partial_wide.shape[1] - 2
    return combine_splits(partial_wide[:, 1:s + 1].transpose(1, 2), lse_wide[..., 1:s + 1])


@pytest.mark.points(1)
def test_combine_splits_of_strided_partial_and_lse_views(device, tol):
    g = torch.Generator().manual_seed(22)
    partial = torch.randn(2, 3, 5, 8, generator=g)  # (B, H, S, D)
    lse = torch.randn(2, 3, 5, generator=g) * 3
    lse[0, 1, 2] = float("-inf")
    nan_split = torch.full((2, 1, 3, 8), float("nan"))
    partial_wide = torch.cat([nan_split, partial.transpose(1, 2), nan_split], dim=1).contiguous()
    lse_wide = torch.cat([torch.full((2, 3, 1), 1e4), lse, torch.full((2, 3, 1), 1e4)], dim=2)
    out = combine_views(partial_wide.to(device), lse_wide.to(device))
    w = torch.softmax(lse.double(), dim=-1)
    expected = (w[..., None] * partial.double()).sum(2)
    torch.testing.assert_close(out.cpu().double(), expected, **tol("paged decode, fp32"),
                               msg=lambda m: f"partial and lse given as strided views:\n{m}")
