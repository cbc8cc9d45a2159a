"""Paged decode, the cases a first kernel gets wrong: the scale, which KV head a query head reads,
splits with no tokens, split and block boundaries, head dims that are not powers of two, caches
that are views, log-sum-exps far from zero, and 64-bit block offsets (GPU).

The oracle is float64 attention over the gathered context (`paged.oracle`, conftest.py).
"""

import math

import pytest
import torch
from autograder.testing import in_worker

from tritonkernels import combine_splits, num_splits_for, paged_decode, paged_decode_split


def _check(paged, tol, q, k, v, tables, lens, scale, split, name="paged decode, fp32"):
    out = paged_decode(q, k, v, tables, lens, scale, split)
    expected, _ = paged.oracle(q, k, v, tables, lens, scale)
    torch.testing.assert_close(out.cpu().double(), expected, **tol(name))


@pytest.mark.points(2)
@pytest.mark.parametrize("scale", [1.7, 0.05])
def test_the_scale_argument_is_applied_to_the_scores(scale, paged, device, tol):
    q, k, v, tables, lens = paged.case(10, [33, 9], head_dim=16, device=device)
    _check(paged, tol, q, k, v, tables, lens, scale, 16)


@pytest.mark.points(2)
# mqa32: a group of 32 query heads per KV head, past the 16 rows a group is padded to at least
@pytest.mark.parametrize(("heads", "kv_heads"), [(8, 2), (3, 3), (6, 1), (32, 1)], ids=["gqa4", "mha", "mqa", "mqa32"])
def test_query_head_h_reads_kv_head_h_over_the_group_size(heads, kv_heads, paged, device, tol):
    q, k, v, tables, lens = paged.case(11, [20, 47], heads=heads, kv_heads=kv_heads, device=device)
    _check(paged, tol, q, k, v, tables, lens, 0.3, 16)


@pytest.mark.points(2)
@pytest.mark.parametrize("lens", [[16], [32], [15, 17], [31, 33, 48]], ids=str)
def test_contexts_ending_at_and_next_to_split_boundaries(lens, paged, device, tol):
    q, k, v, tables, lens_t = paged.case(12, lens, device=device)
    _check(paged, tol, q, k, v, tables, lens_t, 0.3, 16)


@pytest.mark.points(2)
@pytest.mark.parametrize(("block_size", "split"), [(1, 16), (8, 16), (32, 16), (32, 64)])
def test_blocks_smaller_and_larger_than_a_split(block_size, split, paged, device, tol):
    q, k, v, tables, lens = paged.case(13, [70, 1, 33], block_size=block_size, device=device)
    _check(paged, tol, q, k, v, tables, lens, 0.3, split)


@pytest.mark.points(1)
@pytest.mark.parametrize("head_dim", [80, 8])
def test_head_dims_that_are_not_a_power_of_two_or_below_sixteen(head_dim, paged, device, tol):
    q, k, v, tables, lens = paged.case(14, [25, 40], head_dim=head_dim, device=device)
    _check(paged, tol, q, k, v, tables, lens, 1 / math.sqrt(head_dim), 16)


@pytest.mark.points(2)
def test_splits_past_a_short_context_are_empty_zero_and_minus_infinity(paged, device, tol):
    q, k, v, tables, lens = paged.case(15, [100, 3], device=device)  # 7 splits of 16; the second uses 1
    partial, lse = paged_decode_split(q, k, v, tables, lens, 0.3, 16)
    assert partial.shape[2] == lse.shape[2] == num_splits_for(tables, 16, 16) == 7
    assert partial.dtype == lse.dtype == torch.float32
    exact = tol("exact by construction")
    torch.testing.assert_close(partial[1, :, 1:].cpu(), torch.zeros(4, 6, 32), **exact)
    torch.testing.assert_close(lse[1, :, 1:].cpu(), torch.full((4, 6), float("-inf")), **exact)
    expected, expected_lse = paged.oracle(q, k, v, tables, lens, 0.3, token_range=(96, 112))
    torch.testing.assert_close(partial[0, :, 6].cpu().double(), expected[0], **tol("paged decode, fp32"))
    torch.testing.assert_close(lse[0, :, 6].cpu().double(), expected_lse[0], **tol("paged decode, fp32"))


@pytest.mark.points(2)
def test_many_splits_of_one_long_context_combine_exactly(paged, device, tol):
    q, k, v, tables, lens = paged.case(16, [1000, 260], head_dim=16, device=device)  # 63 splits
    _check(paged, tol, q, k, v, tables, lens, 0.4, 16)


@pytest.mark.points(2)
def test_combine_survives_logsumexps_far_from_zero(device, tol):
    # exp(1000) overflows fp32: the merge must subtract the largest lse first.
    g = torch.Generator().manual_seed(17)
    partial = torch.randn(2, 3, 5, 8, generator=g)
    lse = torch.tensor([1000.0, 999.0, float("-inf"), 1001.5, 998.0]).expand(2, 3, 5).contiguous()
    lse[1, 2] = torch.tensor([-1000.0, -1003.0, -999.0, float("-inf"), float("-inf")])
    out = combine_splits(partial.to(device), lse.to(device))
    w = torch.softmax(lse.double(), dim=-1)
    expected = (w[..., None] * partial.double()).sum(2)
    torch.testing.assert_close(out.cpu().double(), expected, **tol("paged decode, fp32"))


@pytest.mark.points(1)
def test_combine_stores_in_the_requested_dtype(device, tol):
    partial = torch.ones(1, 2, 3, 16, device=device)
    lse = torch.zeros(1, 2, 3, device=device)
    out = combine_splits(partial, lse, torch.float16)
    assert out.dtype == torch.float16 and out.shape == (1, 2, 16)
    torch.testing.assert_close(out.cpu().float(), torch.ones(1, 2, 16), **tol("exact by construction"))


@in_worker
def decode_from_one_kv_tensor(q, kv, tables, lens, scale, split):
    """In the worker: caches that are views of one (num_blocks, 2, block_size, Hkv, D) tensor, so
    consecutive blocks are 2 * block_size * Hkv * D elements apart, not block_size * Hkv * D."""
    return paged_decode(q, kv[:, 0], kv[:, 1], tables, lens, scale, split)


@pytest.mark.points(2)
def test_caches_that_are_views_with_a_larger_block_stride(paged, device, tol):
    q, k, v, tables, lens = paged.case(18, [45, 20], device=device)
    kv = torch.stack([k, v], dim=1)
    out = decode_from_one_kv_tensor(q, kv, tables, lens, 0.3, 16)
    expected, _ = paged.oracle(q, k, v, tables, lens, 0.3)
    torch.testing.assert_close(out.cpu().double(), expected, **tol("paged decode, fp32"))


@pytest.mark.gpu
@pytest.mark.points(2)
def test_block_offsets_past_two_to_the_31_elements_gpu(paged, tol):
    # A pool of 2^17 + 4 blocks of 16 x 8 x 128 bf16 (4 GiB per cache): the sequence's blocks start at
    # element 2^17 * 16384 = 2^31, so block * stride overflows int32 unless the block id is widened.
    q, k_small, v_small, tables, lens = paged.case(20, [64], heads=8, kv_heads=8, head_dim=128,
                                                   dtype=torch.bfloat16, device="cuda")
    num_blocks = (1 << 17) + 4
    k = torch.zeros(num_blocks, 16, 8, 128, dtype=torch.bfloat16, device="cuda")
    v = torch.zeros_like(k)
    far = torch.arange(num_blocks - 4, num_blocks, dtype=torch.int32, device="cuda")
    k[far.long()] = k_small[tables[0].long()]
    v[far.long()] = v_small[tables[0].long()]
    out = paged_decode(q, k, v, far[None], lens, 0.1, 64)
    expected, _ = paged.oracle(q, k_small, v_small, tables, lens, 0.1)
    torch.testing.assert_close(out.cpu().double(), expected, **tol("paged decode, bf16"))
