"""Hidden: building blocks at the edges (huge scores, masked rows, large positions, extreme norms)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer import apply_rope, attention, causal_mask, position_ids_for, rms_norm, rope_cos_sin

try:
    from autograder.testing import oracle
except ImportError:
    from contextlib import nullcontext as oracle


def sdpa_gqa_f64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Oracle: SDPA in float64 with kv heads repeated per group, cast back to q's dtype."""
    rep = q.shape[1] // k.shape[1]
    with oracle():
        out = F.scaled_dot_product_attention(
            q.double(), k.repeat_interleave(rep, 1).double(), v.repeat_interleave(rep, 1).double(), attn_mask=mask
        )
    return out.to(q.dtype)


@pytest.mark.points(1)
@pytest.mark.parametrize("kv_heads", [8, 4, 2, 1])
def test_attention_gqa_ratios_with_odd_lengths_match_sdpa(kv_heads):
    gen = torch.Generator().manual_seed(kv_heads)
    q = torch.randn(2, 8, 5, 8, generator=gen)
    k = torch.randn(2, kv_heads, 9, 8, generator=gen)
    v = torch.randn(2, kv_heads, 9, 8, generator=gen)
    mask = torch.ones(5, 9).tril(diagonal=4).bool()[None, None]
    torch.testing.assert_close(attention(q, k, v, mask), sdpa_gqa_f64(q, k, v, mask), atol=1e-5, rtol=1e-5)


@pytest.mark.points(2)
def test_attention_is_stable_for_huge_scores():
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, 4, 6, 16, generator=gen) * 100.0  # scores q.k / 4 of order 1e4
    k = torch.randn(1, 2, 6, 16, generator=gen) * 100.0
    v = torch.randn(1, 2, 6, 16, generator=gen)
    mask = torch.ones(6, 6).tril().bool()[None, None]
    out = attention(q, k, v, mask)
    assert torch.isfinite(out).all()
    # The softmax is one-hot to float precision; fp32 scores of 1e4 carry ~1e-3 absolute rounding.
    torch.testing.assert_close(out, sdpa_gqa_f64(q, k, v, mask), atol=1e-4, rtol=1e-4)


@pytest.mark.points(1)
def test_fully_masked_query_rows_stay_finite():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 2, 4, 8, generator=gen) for _ in range(3))
    padding = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])  # row 0: first two slots are left padding
    mask = causal_mask(4, 4, padding)
    out = attention(q, k, v, mask)
    assert torch.isfinite(out).all(), "padding queries (no visible key) must not produce NaN/inf"
    # Rows with at least one visible key are exact (atol 1e-5).
    torch.testing.assert_close(out[0, :, 2:], sdpa_gqa_f64(q, k, v, mask)[0, :, 2:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1], sdpa_gqa_f64(q, k, v, mask)[1], atol=1e-5, rtol=1e-5)


@pytest.mark.points(1)
def test_causal_mask_edge_shapes():
    assert torch.equal(causal_mask(1, 1).expand(1, 1, 1, 1), torch.ones(1, 1, 1, 1, dtype=torch.bool))
    mask = causal_mask(2, 6, torch.tensor([[0, 1, 1, 1, 1, 1]])).expand(1, 1, 2, 6)[0, 0]
    expected = torch.tensor([[0, 1, 1, 1, 1, 0], [0, 1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(mask, expected)


@pytest.mark.points(1)
@pytest.mark.parametrize("scale", [1e-4, 1.0, 1e4])
def test_rms_norm_matches_hf_across_magnitudes(scale):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 7, 48, generator=gen) * scale  # at 1e-4, eps = 1e-6 visibly matters
    weight = 0.5 + torch.rand(48, generator=gen)
    with oracle(), torch.no_grad():
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        hf = LlamaRMSNorm(48, eps=1e-6)
        hf.weight.copy_(weight)
        expected = hf(x)
    torch.testing.assert_close(rms_norm(x, weight, 1e-6), expected, atol=1e-5, rtol=1e-5)  # fp32


@pytest.mark.points(1)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_rms_norm_in_half_precision_matches_hf_bit_for_bit(dtype):
    # HF's order is the contract: statistics in fp32, the normalised x cast to x.dtype, *then* times
    # the (half-precision) weight. Multiplying by the weight before the cast rounds once instead of
    # twice and is 1 ulp off in about a quarter of the outputs.
    gen = torch.Generator().manual_seed(6)
    x = (torch.randn(4, 8, 64, generator=gen) * 3.0).to(dtype)
    weight = (0.5 + torch.rand(64, generator=gen)).to(dtype)
    with oracle(), torch.no_grad():
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        hf = LlamaRMSNorm(64, eps=1e-6).to(dtype)
        hf.weight.copy_(weight)
        expected = hf(x)
    out = rms_norm(x, weight, 1e-6)
    assert out.dtype == dtype
    assert torch.equal(out, expected), f"{int((out != expected).sum())} of {out.numel()} values differ from HF"


@pytest.mark.points(1)
def test_rope_at_large_positions_matches_hf(hf_config):
    positions = torch.tensor([[0, 1, 1023, 4095, 8191]])
    x = torch.randn(1, 2, 5, 64, generator=torch.Generator().manual_seed(4))
    with oracle():
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

        cfg = hf_config(hidden_size=128, num_attention_heads=2, rope_theta=500000.0)
        hf_cos, hf_sin = LlamaRotaryEmbedding(config=cfg)(torch.zeros(1), positions)
        hf_x, _ = apply_rotary_pos_emb(x, x, hf_cos, hf_sin)
    cos, sin = rope_cos_sin(positions, 64, 500000.0)
    # fp32 angles up to 8191 rad: rounding of position * inv_freq alone is ~5e-4, so atol 2e-3.
    torch.testing.assert_close(cos, hf_cos, atol=2e-3, rtol=0)
    torch.testing.assert_close(sin, hf_sin, atol=2e-3, rtol=0)
    torch.testing.assert_close(apply_rope(x, hf_cos, hf_sin), hf_x, atol=1e-5, rtol=1e-5)


@pytest.mark.points(1)
def test_apply_rope_keeps_bf16():
    x = torch.randn(1, 2, 3, 8, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    cos, sin = rope_cos_sin(torch.tensor([[3, 4, 5]]), 8, 10000.0)
    out = apply_rope(x, cos, sin)
    assert out.dtype == torch.bfloat16
    expected = apply_rope(x.float(), cos, sin)  # bf16 keeps ~3 significant digits: atol 3e-2
    torch.testing.assert_close(out.float(), expected, atol=3e-2, rtol=3e-2)


@pytest.mark.points(1)
def test_position_ids_count_real_tokens_and_cached_slots():
    assert position_ids_for(3, 4, None, 2, torch.device("cpu")).tolist() == [[4, 5, 6], [4, 5, 6]]
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1]])
    expected = []
    for row in mask.tolist():  # position of slot j = number of real tokens before it (pads: 0)
        expected.append([sum(row[:j]) if row[j] else 0 for j in range(len(row))][-2:])
    assert position_ids_for(2, 4, mask, 3, torch.device("cpu")).tolist() == expected
