"""The building blocks against their Hugging Face / PyTorch counterparts (fp32, CPU)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer import MLP, LlamaConfig, apply_rope, attention, causal_mask, rms_norm, rope_cos_sin

try:
    from autograder.testing import oracle
except ImportError:
    from contextlib import nullcontext as oracle


def sdpa_gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Oracle: PyTorch SDPA with every kv head repeated for its group of query heads."""
    rep = q.shape[1] // k.shape[1]
    with oracle():
        return F.scaled_dot_product_attention(
            q, k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1), attn_mask=mask
        )


@pytest.mark.points(1)
def test_rms_norm_matches_hf_fp32_and_bf16():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 64, generator=gen) * 3
    weight = 0.5 + torch.rand(64, generator=gen)
    with oracle(), torch.no_grad():
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        hf = LlamaRMSNorm(64, eps=1e-5)
        hf.weight.copy_(weight)
        expected = hf(x)
        expected_bf16 = hf.to(torch.bfloat16)(x.to(torch.bfloat16))
    # fp32: same operations as HF, so agreement to float rounding (atol 1e-6).
    torch.testing.assert_close(rms_norm(x, weight, 1e-5), expected, atol=1e-6, rtol=1e-6)
    out = rms_norm(x.to(torch.bfloat16), weight.to(torch.bfloat16), 1e-5)
    assert out.dtype == torch.bfloat16
    # bf16 keeps ~3 significant digits: atol = rtol = 1e-2.
    torch.testing.assert_close(out, expected_bf16, atol=1e-2, rtol=1e-2)


@pytest.mark.points(1)
@pytest.mark.parametrize("theta", [10000.0, 500000.0])
def test_rope_cos_sin_match_hf_rotary_embedding(theta, hf_config):
    head_dim = 16
    positions = torch.tensor([[0, 1, 2, 3, 77, 300], [5, 4, 3, 2, 1, 0]])
    with oracle():
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        hf = LlamaRotaryEmbedding(config=hf_config(hidden_size=64, num_attention_heads=4, rope_theta=theta))
        hf_cos, hf_sin = hf(torch.zeros(1, dtype=torch.float32), positions)
    cos, sin = rope_cos_sin(positions, head_dim, theta)
    assert cos.shape == sin.shape == (2, 6, head_dim)
    # Angles up to 300 rad in fp32: atol 1e-5 allows a different but sound op order.
    torch.testing.assert_close(cos, hf_cos, atol=1e-5, rtol=0)
    torch.testing.assert_close(sin, hf_sin, atol=1e-5, rtol=0)


@pytest.mark.points(1)
def test_apply_rope_matches_hf_rotate_half():
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 6, 16, generator=gen)
    k = torch.randn(2, 2, 6, 16, generator=gen)
    positions = torch.arange(6).repeat(2, 1) + torch.tensor([[0], [9]])
    cos, sin = rope_cos_sin(positions, 16, 10000.0)
    with oracle():
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        hf_q, hf_k = apply_rotary_pos_emb(q, k, cos, sin)
    # Same elementwise formula as HF: atol 1e-6.
    torch.testing.assert_close(apply_rope(q, cos, sin), hf_q, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(apply_rope(k, cos, sin), hf_k, atol=1e-6, rtol=1e-6)


@pytest.mark.points(1)
def test_rope_scores_depend_only_on_relative_position():
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(1, 1, 1, 32, generator=gen)
    k = torch.randn(1, 1, 1, 32, generator=gen)

    def score(m: int, n: int) -> torch.Tensor:
        cq, sq = rope_cos_sin(torch.tensor([[m]]), 32, 10000.0)
        ck, sk = rope_cos_sin(torch.tensor([[n]]), 32, 10000.0)
        return (apply_rope(q, cq, sq) * apply_rope(k, ck, sk)).sum()

    # A rotation keeps norms; <R_m q, R_n k> depends on m - n only (fp32, atol 1e-4).
    cq, sq = rope_cos_sin(torch.tensor([[41]]), 32, 10000.0)
    torch.testing.assert_close(apply_rope(q, cq, sq).norm(), q.norm(), atol=1e-4, rtol=0)
    torch.testing.assert_close(score(7, 3), score(107, 103), atol=1e-4, rtol=0)
    torch.testing.assert_close(score(0, 5), score(20, 25), atol=1e-4, rtol=0)
    assert not torch.allclose(score(7, 3), score(3, 7), atol=1e-3), "the rotation must depend on the sign of m - n"


@pytest.mark.points(1)
@pytest.mark.parametrize("t,s", [(5, 5), (1, 7), (3, 8)])
def test_causal_mask_lets_query_i_see_keys_up_to_its_slot(t, s):
    expected = torch.ones(t, s).tril(diagonal=s - t).bool()  # query i sits at slot s - t + i
    mask = causal_mask(t, s)
    assert mask.dtype == torch.bool
    assert torch.equal(mask.expand(1, 1, t, s)[0, 0], expected)
    padding = torch.ones(2, s, dtype=torch.long)
    padding[1, :2] = 0  # row 1 is left-padded by two slots
    mask = causal_mask(t, s, padding)
    assert torch.equal(mask.expand(2, 1, t, s)[:, 0], expected[None] & padding.bool()[:, None, :])


@pytest.mark.points(2)
@pytest.mark.parametrize("t,s", [(7, 7), (3, 8), (1, 5)])
def test_gqa_attention_matches_sdpa(t, s):
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, t, 16, generator=gen)
    k = torch.randn(2, 2, s, 16, generator=gen)
    v = torch.randn(2, 2, s, 16, generator=gen)
    mask = torch.ones(t, s).tril(diagonal=s - t).bool()[None, None]
    out = attention(q, k, v, mask)
    assert out.shape == (2, 4, t, 16)
    # fp32, different summation order than SDPA: atol 1e-5.
    torch.testing.assert_close(out, sdpa_gqa(q, k, v, mask), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(attention(q, k, v, None), sdpa_gqa(q, k, v, None), atol=1e-5, rtol=1e-5)


@pytest.mark.points(1)
def test_swiglu_mlp_matches_hf(hf_config):
    x = torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(4))
    with oracle(), torch.no_grad():
        from transformers.models.llama.modeling_llama import LlamaMLP

        hf = LlamaMLP(hf_config(hidden_size=64, intermediate_size=160))
        expected = hf(x)
    cfg = LlamaConfig(
        vocab_size=8, hidden_size=64, intermediate_size=160, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
    )  # fmt: skip
    mlp = MLP(cfg)
    mlp.load_state_dict(hf.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(mlp(x), expected, atol=1e-5, rtol=1e-5)  # fp32: atol 1e-5
