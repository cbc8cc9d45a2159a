"""Forward pass: O and the saved log-sum-exp against plain attention (and SDPA)."""

import pytest
import torch
import torch.nn.functional as F
from autograder.testing import oracle

from flashattn import flash_attn_forward


@pytest.mark.points(3)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_forward_matches_reference_fp32(causal, device, qkv_factory, attention_check):
    q, k, v, do = qkv_factory(2, 2, 2, 64, 64, torch.float32, device, seed=0)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2, backward=False)


@pytest.mark.points(2)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_forward_matches_reference_fp16(causal, device, qkv_factory, attention_check):
    q, k, v, do = qkv_factory(1, 3, 3, 48, 32, torch.float16, device, seed=1)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2, backward=False)


@pytest.mark.points(1)
def test_forward_matches_sdpa(device, qkv_factory):
    q, k, v, _ = qkv_factory(1, 2, 2, 64, 64, torch.float32, device, seed=2)
    q, k, v = q.detach(), k.detach(), v.detach()
    o, _ = flash_attn_forward(q, k, v, causal=True)
    with oracle():
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(o, ref, rtol=1e-2, atol=1e-2)


@pytest.mark.points(1)
def test_causal_first_row_copies_first_value(device, qkv_factory):
    # Query 0 sees key 0 only: o_0 = v_0 and lse_0 = s_00 exactly (up to rounding).
    q, k, v, _ = qkv_factory(1, 2, 2, 40, 64, torch.float32, device, seed=3)
    q, k, v = q.detach(), k.detach(), v.detach()
    o, lse = flash_attn_forward(q, k, v, causal=True)
    torch.testing.assert_close(o[:, :, 0], v[:, :, 0], rtol=1e-5, atol=1e-5)
    s00 = (q[:, :, 0] * k[:, :, 0]).sum(-1) / 8.0  # 1 / sqrt(64)
    torch.testing.assert_close(lse[:, :, 0], s00, rtol=1e-5, atol=1e-5)
