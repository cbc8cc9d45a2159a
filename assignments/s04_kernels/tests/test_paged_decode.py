"""Paged decode attention with split-KV against attention over the gathered context (float64).

Every batch comes from `paged.case` (conftest.py): shuffled block tables, grouped-query heads, and
NaN in every cache slot past a context, so a slot read by mistake shows up as NaN.
"""

import math

import pytest
import torch

from tritonkernels import combine_splits, paged_decode, paged_decode_split


@pytest.mark.points(3)
@pytest.mark.parametrize("split_tokens", [16, 64, 256])
def test_paged_decode_matches_attention_over_the_gathered_context_fp32(split_tokens, paged, device, tol):
    q, k, v, tables, lens = paged.case(0, [1, 17, 100], device=device)
    scale = 1 / math.sqrt(q.shape[-1])
    out = paged_decode(q, k, v, tables, lens, scale, split_tokens)
    assert out.shape == q.shape and out.dtype == q.dtype
    expected, _ = paged.oracle(q, k, v, tables, lens, scale)
    torch.testing.assert_close(out.cpu().double(), expected, **tol("paged decode, fp32"))


@pytest.mark.points(2)
def test_each_split_is_attention_over_its_own_tokens_with_their_logsumexp(paged, device, tol):
    split = 16
    q, k, v, tables, lens = paged.case(1, [40, 5], device=device)
    partial, lse = paged_decode_split(q, k, v, tables, lens, 0.25, split)
    assert partial.shape == (2, 4, 3, 32) and lse.shape == (2, 4, 3)  # 3 blocks of 16 -> 3 splits
    for s in range(3):
        expected, expected_lse = paged.oracle(q, k, v, tables, lens, 0.25, token_range=(s * split, (s + 1) * split))
        torch.testing.assert_close(partial[:, :, s].cpu().double(), expected, **tol("paged decode, fp32"))
        torch.testing.assert_close(lse[:, :, s].cpu().double(), expected_lse, **tol("paged decode, fp32"))


@pytest.mark.points(2)
def test_combining_splits_weights_each_by_its_share_of_the_softmax_mass(device, tol):
    # Two splits of one head: out = (e^lse0 * out0 + e^lse1 * out1) / (e^lse0 + e^lse1).
    partial = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]]], device=device)  # (1, 1, 2, 2)
    lse = torch.tensor([[[0.0, math.log(3.0)]]], device=device)  # weights 1/4 and 3/4
    out = combine_splits(partial, lse)
    torch.testing.assert_close(out.cpu(), torch.tensor([[[0.25, 0.75]]]), **tol("paged decode, fp32"))


@pytest.mark.points(1)
def test_fp16_caches(paged, device, tol):
    q, k, v, tables, lens = paged.case(2, [70, 3], dtype=torch.float16, device=device)
    out = paged_decode(q, k, v, tables, lens, 0.2, 32)
    assert out.dtype == torch.float16
    expected, _ = paged.oracle(q, k, v, tables, lens, 0.2)
    torch.testing.assert_close(out.cpu().double(), expected, **tol("paged decode, fp16"))


@pytest.mark.gpu
@pytest.mark.points(2)
def test_paged_decode_full_size_gpu(paged, tol):
    # 8 sequences of 2k-4k tokens, 32 query / 8 KV heads of 128, blocks of 16 (a LLaMA-3-8B layer).
    lens = [4096, 2048, 3001, 2500, 4000, 2222, 3333, 2049]
    q, k, v, tables, lens_t = paged.case(3, lens, heads=32, kv_heads=8, head_dim=128, dtype=torch.bfloat16,
                                         device="cuda")
    out = paged_decode(q, k, v, tables, lens_t, 1 / math.sqrt(128), 256)
    expected, _ = paged.oracle(q, k, v, tables, lens_t, 1 / math.sqrt(128))
    torch.testing.assert_close(out.cpu().double(), expected, **tol("paged decode, bf16"))
