"""The int8 KV cache, thoroughly: storage, appends in pieces, validation, GQA and chunked prefill."""

import math

import pytest
import torch
import torch.nn.functional as F
from quant import Int8KVCache, dequantize_kv, quantize_kv, quantized_attention

try:
    from autograder.testing import oracle
except ImportError:
    from contextlib import nullcontext as oracle


def sdpa(q, k, v, tq_offset):
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    mask = None if tq_offset is None else torch.arange(k.shape[2]) <= torch.arange(q.shape[2]).unsqueeze(1) + tq_offset
    with oracle():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.points(1)
def test_zero_vectors_and_ties():
    x = torch.zeros(1, 1, 3, 4)
    x[0, 0, 1] = torch.tensor([127.0, 2.5, -3.5, 0.5])  # scale 1: ties round to even
    q, scale = quantize_kv(x)
    assert q[0, 0, 1].tolist() == [127, 2, -4, 0]
    assert scale[0, 0, 0].item() == 1.0 and q[0, 0, 0].tolist() == [0, 0, 0, 0]
    assert not dequantize_kv(q, scale).isnan().any()


@pytest.mark.points(2)
def test_cache_stores_per_token_codes_when_filled_piece_by_piece(tol):
    gen = torch.Generator().manual_seed(0)
    b, h, d = 2, 2, 16
    k = torch.randn(b, h, 12, d, generator=gen) * torch.logspace(-2, 2, 12).view(1, 1, 12, 1)
    v = torch.randn(b, h, 12, d, generator=gen)
    cache = Int8KVCache(b, h, 20, d)
    for a, e in ((0, 5), (5, 6), (6, 12)):
        cache.append(k[:, :, a:e], v[:, :, a:e])
    assert cache.length == 12
    k_scale = k.abs().amax(-1, keepdim=True) / 127
    torch.testing.assert_close(cache.k_scale[:, :, :12], k_scale, **tol("exact"))
    torch.testing.assert_close(cache.k_q[:, :, :12].float(), torch.round(k / k_scale), **tol("exact"))
    torch.testing.assert_close(cache.v_scale[:, :, :12], v.abs().amax(-1, keepdim=True) / 127, **tol("exact"))
    kd, vd = cache.keys_values()
    assert kd.shape == (b, h, 12, d) and vd.dtype == torch.float32
    torch.testing.assert_close(kd, cache.k_q[:, :, :12].float() * k_scale, **tol("exact"))
    # the small tokens keep their precision: relative error per token at most 1 / 254 of its amax
    assert ((kd - k).abs() <= k.abs().amax(-1, keepdim=True) / 254 * (1 + 1e-6)).all()


@pytest.mark.points(1)
def test_cache_refuses_overflow_and_wrong_shapes():
    cache = Int8KVCache(1, 2, 4, 8)
    cache.append(torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8))
    with pytest.raises(ValueError):
        cache.append(torch.randn(1, 2, 2, 8), torch.randn(1, 2, 2, 8))
    with pytest.raises(ValueError):
        cache.append(torch.randn(1, 3, 1, 8), torch.randn(1, 3, 1, 8))
    with pytest.raises(ValueError):
        cache.append(torch.randn(1, 2, 1, 8), torch.randn(1, 2, 1, 4))
    assert cache.length == 3


@pytest.mark.points(2)
@pytest.mark.parametrize("tq", [1, 7, 30])
def test_gqa_causal_attention_over_the_cache_matches_sdpa(tol, tq):
    gen = torch.Generator().manual_seed(tq)
    b, hkv, hq, s, d = 2, 2, 8, 30, 32
    k, v = torch.randn(b, hkv, s, d, generator=gen), torch.randn(b, hkv, s, d, generator=gen)
    cache = Int8KVCache(b, hkv, 32, d)
    cache.append(k, v)
    kd, vd = cache.keys_values()
    q = torch.randn(b, hq, tq, d, generator=gen)
    out = quantized_attention(q, cache, causal=True)
    torch.testing.assert_close(out, sdpa(q, kd, vd, s - tq), **tol("fp32 attention"))


@pytest.mark.points(2)
def test_outlier_tokens_do_not_coarsen_the_others():
    # 3 tokens of magnitude 100 among 61 of magnitude 1: per-token scales keep the attention output
    # within the rounding bound of the ordinary tokens' own ranges.
    gen = torch.Generator().manual_seed(9)
    b, h, s, d = 1, 2, 64, 64
    k = torch.randn(b, h, s, d, generator=gen)
    v = torch.randn(b, h, s, d, generator=gen)
    k[:, :, [3, 17, 40]] *= 100.0
    cache = Int8KVCache(b, h, s, d)
    cache.append(k, v)
    kd, _ = cache.keys_values()
    # every token, ordinary or not, is rounded on its own grid: error <= its own amax / 254
    assert ((kd - k).abs() <= k.abs().amax(-1, keepdim=True) / 254 * (1 + 1e-6)).all()
    q = torch.randn(b, h, 1, d, generator=gen) / math.sqrt(d)
    out = quantized_attention(q, cache, causal=True)
    assert (out - sdpa(q, k, v, s - 1)).abs().max() < 0.02
