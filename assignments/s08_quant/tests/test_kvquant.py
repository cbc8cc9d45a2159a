"""The int8 KV cache: per-token codes and scales, attention from it against SDPA."""

import math

import pytest
import torch
import torch.nn.functional as F
from quant import Int8KVCache, quantize_kv, quantized_attention

try:
    from autograder.testing import oracle
except ImportError:
    from contextlib import nullcontext as oracle


def sdpa(q, k, v, causal_offset: int | None):
    """Oracle: SDPA (fp32) with kv heads repeated for GQA and a bottom-right causal mask."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    mask = None
    if causal_offset is not None:
        tq, s = q.shape[2], k.shape[2]
        mask = torch.arange(s).unsqueeze(0) <= torch.arange(tq).unsqueeze(1) + causal_offset
    with oracle():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.points(2)
def test_quantize_kv_uses_one_scale_per_token_and_head(tol):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 17, 64, generator=gen) * torch.logspace(-3, 2, 17).view(1, 1, 17, 1)
    q, scale = quantize_kv(x)
    assert q.dtype == torch.int8 and q.shape == x.shape
    assert scale.dtype == torch.float32 and scale.shape == (2, 3, 17, 1)
    expected_scale = x.abs().amax(dim=-1, keepdim=True) / 127
    torch.testing.assert_close(scale, expected_scale, **tol("exact"))
    torch.testing.assert_close(q.float(), torch.round(x / expected_scale).clamp(-127, 127), **tol("exact"))


def error_bound(q, k, v, rep):
    """Elementwise bound on |attention(q, K~, V~) - attention(q, K, V)| for round-to-nearest int8
    with per-token scales: |K~ - K| <= dk_t = amax(K_t) / 254, so a score moves by at most
    eps = ||q||_1 max_t dk_t / sqrt(D) and each softmax weight by a factor in [e^-2eps, e^2eps];
    the output moves by at most (e^(2 eps) - 1) max_t |V_t| + max_t amax(V_t) / 254."""
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    dk = (k.abs().amax(dim=-1) / 254).amax(dim=-1)  # (B, H)
    dv = (v.abs().amax(dim=-1) / 254).amax(dim=-1)
    eps = q.abs().sum(dim=-1) * dk.unsqueeze(-1) / math.sqrt(q.shape[-1])  # (B, H, Tq)
    vmax = v.abs().amax(dim=2, keepdim=True)  # (B, H, 1, D)
    return torch.expm1(2 * eps).unsqueeze(-1) * vmax + dv[..., None, None]


@pytest.mark.points(1)
def test_codes_divide_by_the_scale_not_multiply_by_its_reciprocal():
    # Found by search: x / scale rounds to 116, x * (1 / scale) to 117.
    x = torch.tensor([[0.6724501848220825, 0.6168538928031921]])
    q, _ = quantize_kv(x)
    scale = x[0, 0] / 127
    reciprocal = torch.round(x * (1 / scale)).tolist()
    pitfall = (" Those are the codes of x * (1 / scale): the handout's pitfall. The reciprocal is rounded, so the "
               "product can land one bit off an exact .5; compute round(x / scale).") if q.tolist() == reciprocal else ""
    assert q.tolist() == [[127, 116]], (
        f"quantize_kv({x.tolist()}): scale = {x[0, 0].item()!r} / 127, round(x / scale) = [[127, 116]]; "
        f"got {q.tolist()}.{pitfall}")


@pytest.mark.points(3)
def test_decode_from_the_int8_cache_is_within_the_rounding_bound_of_fp32_attention():
    gen = torch.Generator().manual_seed(1)
    b, hkv, hq, s, d = 2, 2, 6, 40, 64
    k = torch.randn(b, hkv, s, d, generator=gen)
    v = torch.randn(b, hkv, s, d, generator=gen)
    cache = Int8KVCache(b, hkv, 64, d)
    cache.append(k[:, :, :33], v[:, :, :33])  # prefill, then decode steps
    for t in range(33, s):
        cache.append(k[:, :, t : t + 1], v[:, :, t : t + 1])
    assert cache.length == s
    q = torch.randn(b, hq, 1, d, generator=gen)
    out = quantized_attention(q, cache, causal=True)
    exact = sdpa(q, k, v, causal_offset=s - 1)
    assert out.shape == (b, hq, 1, d) and out.dtype == torch.float32
    err = (out - exact).abs()
    assert (err <= error_bound(q, k, v, hq // hkv) + 1e-5).all()  # 1e-5: fp32 attention itself
    assert err.max() > 0  # the cache really is quantized


@pytest.mark.points(2)
def test_attention_over_the_dequantized_cache_matches_sdpa(tol):
    gen = torch.Generator().manual_seed(2)
    b, h, s, d = 1, 4, 24, 32
    k, v = torch.randn(b, h, s, d, generator=gen), torch.randn(b, h, s, d, generator=gen)
    cache = Int8KVCache(b, h, s, d)
    cache.append(k, v)
    kd, vd = cache.k_q.float() * cache.k_scale, cache.v_q.float() * cache.v_scale  # what the cache holds
    q = torch.randn(b, h, 5, d, generator=gen)  # the last 5 positions of a chunked prefill
    causal, full = quantized_attention(q, cache, causal=True), quantized_attention(q, cache, causal=False)
    torch.testing.assert_close(causal, sdpa(q, kd, vd, s - 5), **tol("fp32 attention"))
    torch.testing.assert_close(full, sdpa(q, kd, vd, None), **tol("fp32 attention"))
