"""Edge cases on small shapes: ragged lengths, grouped-query heads, masked tiles, head dims,
peaked scores, strided inputs, a custom scale. Every case checks O, LSE, dQ, dK and dV."""

import pytest
import torch
import torch.nn.functional as F
from autograder.testing import in_worker, oracle

from flashattn import flash_attention, flash_attn_forward

CAUSAL = pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])


@pytest.mark.points(2)
@CAUSAL
@pytest.mark.parametrize("seq_len", [1, 17, 45])
def test_sequence_lengths_not_multiple_of_the_tile(seq_len, causal, device, qkv_factory,
                                                    attention_check):
    q, k, v, do = qkv_factory(1, 2, 2, seq_len, 32, torch.float32, device, seed=seq_len)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)


@pytest.mark.points(3)
@CAUSAL
@pytest.mark.parametrize("kv_heads", [1, 2], ids=["mqa", "gqa2"])
def test_grouped_query_heads(kv_heads, causal, device, qkv_factory, attention_check):
    # 4 query heads over 1 (multi-query) or 2 KV heads: dK, dV sum over each group.
    q, k, v, do = qkv_factory(1, 4, kv_heads, 40, 32, torch.float32, device, seed=30 + kv_heads)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)


@pytest.mark.points(2)
def test_grouped_query_heads_match_sdpa(device, qkv_factory):
    q, k, v, _ = qkv_factory(1, 6, 2, 33, 32, torch.float32, device, seed=35)
    q, k, v = q.detach(), k.detach(), v.detach()
    o, _ = flash_attn_forward(q, k, v, causal=True)
    with oracle():
        ref = F.scaled_dot_product_attention(q, k.repeat_interleave(3, 1),
                                             v.repeat_interleave(3, 1), is_causal=True)
    torch.testing.assert_close(o, ref, rtol=1e-2, atol=1e-2)


@pytest.mark.points(2)
def test_causal_fully_masked_tiles_contribute_nothing(device, qkv_factory, attention_check,
                                                      attention_grads):
    # 100 tokens span many tiles: most key tiles lie wholly above the diagonal of early query
    # tiles. The last key is seen by the last query only, the first query sees one key.
    q, k, v, do = qkv_factory(1, 1, 1, 100, 16, torch.float32, device, seed=40)
    attention_check(q, k, v, do, causal=True, rtol=1e-2, atol=1e-2)
    _, dq, dk, dv = attention_grads(q, k, v, do, causal=True)
    assert torch.isfinite(dq).all() and torch.isfinite(dk).all() and torch.isfinite(dv).all()
    # dV of the last key = P[N-1, N-1] * dO[N-1]; its P comes from the last row only.
    o, lse = flash_attn_forward(q.detach(), k.detach(), v.detach(), causal=True)
    with oracle():
        p_last = torch.exp((q[0, 0, -1] @ k[0, 0, -1]) / 4.0 - lse[0, 0, -1])
    torch.testing.assert_close(dv[0, 0, -1], p_last.detach() * do[0, 0, -1], rtol=1e-4, atol=1e-5)


@pytest.mark.points(2)
@CAUSAL
@pytest.mark.parametrize("head_dim", [16, 128])
def test_other_head_dims(head_dim, causal, device, qkv_factory, attention_check):
    q, k, v, do = qkv_factory(1, 2, 1, 37, head_dim, torch.float32, device, seed=head_dim)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)


@pytest.mark.points(2)
@CAUSAL
def test_peaked_scores_need_the_running_rescale(causal, device, qkv_factory, attention_check):
    # Large logits (std ~ 6) and a growing ramp: the row max keeps moving across key tiles.
    q, k, v, do = qkv_factory(1, 2, 2, 64, 32, torch.float32, device, seed=50, q_scale=6.0)
    with torch.no_grad():
        k += torch.linspace(0, 3, 64, device=device)[None, None, :, None]
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)


@pytest.mark.points(1)
@CAUSAL
def test_half_precision_ragged(causal, device, qkv_factory, attention_check):
    q, k, v, do = qkv_factory(1, 2, 1, 29, 64, torch.float16, device, seed=60)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)


@pytest.mark.points(1)
@pytest.mark.parametrize("sm_scale", [0.37, 0.0], ids=["0.37", "zero"])
def test_custom_softmax_scale(sm_scale, device, qkv_factory, attention_check):
    # zero is a scale too (every weight equal: o is the mean of v); `sm_scale or default` loses it
    q, k, v, do = qkv_factory(1, 2, 2, 24, 32, torch.float32, device, seed=70)
    attention_check(q, k, v, do, causal=True, rtol=1e-2, atol=1e-2, sm_scale=sm_scale)


@in_worker
def strided_qkv_grad(qkv):
    """In the worker: q, k, v as transposed views of the leaf qkv (B, N, 3, H, d), and qkv.grad
    after .sum().backward(), which hands the backward an expanded (stride 0) gradient. The views
    are taken here: a tensor crosses between the processes as a contiguous copy."""
    leaf = qkv.requires_grad_()
    q, k, v = (leaf[:, :, i].transpose(1, 2) for i in range(3))  # (B, H, N, d), strided
    o = flash_attention(q, k, v, causal=True)
    do = torch.ones((), device=o.device, dtype=o.dtype).expand_as(o)  # what .sum().backward() hands it
    # gradients of the views, not of the leaf: the engine's select/add into qkv.grad would be the
    # test's own ops, which the accounting of this kernel exercise would count as the submission's
    grads = torch.autograd.grad(o, (q, k, v), do)
    with oracle():
        return torch.stack([g.transpose(1, 2) for g in grads], dim=2)  # (B, N, 3, H, d), like qkv.grad


@pytest.mark.points(1)
def test_strided_inputs_and_expanded_gradient(device, attention_oracle):
    # q, k, v as transposed views of a (B, N, H, d) projection; .sum() hands backward an
    # expanded (stride 0) gradient.
    g = torch.Generator(device=device).manual_seed(80)
    qkv = torch.randn(1, 20, 3, 2, 32, generator=g, device=device)  # (B, N, 3, H, d)
    grad = strided_qkv_grad(qkv)
    ref_leaf = qkv.double().requires_grad_()
    rq, rk, rv = (ref_leaf[:, :, i].transpose(1, 2) for i in range(3))
    with oracle():
        attention_oracle(rq, rk, rv, causal=True)[0].sum().backward()
    torch.testing.assert_close(grad.double(), ref_leaf.grad, rtol=1e-2, atol=1e-2)
