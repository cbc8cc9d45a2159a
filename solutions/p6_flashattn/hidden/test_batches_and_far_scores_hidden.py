"""Batches of grouped-query heads, and rows whose every score lies far below zero.

Each case checks O, LSE, dQ, dK and dV against plain attention and torch SDPA (float64 on the
CPU). Shapes are small: the CPU runs the kernels in Triton's interpreter.
"""

import pytest
import torch
import torch.nn.functional as F
from autograder.testing import oracle

from flashattn import flash_attn_forward

CAUSAL = pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])


def sdpa_oracle(q, k, v, do, causal, work=None):
    """SDPA (grouped heads by enable_gqa) and autograd in `work` (default: float64 on the CPU,
    float32 on the GPU): (o, dq, dk, dv)."""
    work = work or (torch.float64 if q.device.type == "cpu" else torch.float32)
    leaves = [t.detach().to(work).requires_grad_() for t in (q, k, v)]
    with oracle():
        o = F.scaled_dot_product_attention(*leaves, is_causal=causal, enable_gqa=True)
        return (o.detach(), *torch.autograd.grad(o, leaves, do.to(work)))


def _check_with_sdpa(q, k, v, do, causal, attention_grads, rtol, atol, work=None):
    o, *grads = attention_grads(q, k, v, do, causal=causal)
    ref_o, *ref_grads = sdpa_oracle(q, k, v, do, causal, work)
    for name, got, ref in zip(("O", "dQ", "dK", "dV"), (o, *grads), (ref_o, *ref_grads)):
        torch.testing.assert_close(got.to(ref.dtype), ref, rtol=rtol, atol=atol,
                                   msg=lambda m, name=name: f"{name}: {m}")


# --- batch >= 2 with grouped-query heads ------------------------------------------------------

@pytest.mark.points(3)
@CAUSAL
def test_batched_grouped_query_heads(causal, device, qkv_factory, attention_check,
                                     attention_grads):
    # Batch 2, 4 query heads over 2 KV heads: batch b's query head h reads KV head
    # (b, h // 2), and dK, dV of batch b sum over batch b's queries only.
    q, k, v, do = qkv_factory(2, 4, 2, 24, 16, torch.float32, device, seed=90)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)
    _check_with_sdpa(q, k, v, do, causal, attention_grads, rtol=1e-2, atol=1e-2)


@pytest.mark.points(2)
def test_batched_multi_query_heads_differ_per_batch(device, qkv_factory, attention_check):
    # Batch 3, 3 query heads over one KV head, and each batch's keys shifted differently: a
    # kernel that reads another batch's K, V (or Q, dO in the backward) cannot match.
    q, k, v, do = qkv_factory(3, 3, 1, 20, 16, torch.float32, device, seed=91)
    with torch.no_grad():
        k += torch.tensor([0.0, 1.0, -1.0], device=device)[:, None, None, None]
        v *= torch.tensor([1.0, 2.0, -0.5], device=device)[:, None, None, None]
    attention_check(q, k, v, do, causal=True, rtol=1e-2, atol=1e-2)


# --- every score far below zero ---------------------------------------------------------------

def _far_negative_qkv(offset, device, seq_len=40, head_dim=32, seed=95):
    """q, k, v, do (fp32, batch 1, 2 heads) with s_ij = q_i.k_j / sqrt(d) about -offset for every
    pair, spread by a few units around it: q_i = (sqrt(offset d), noise), k_j = (-sqrt(offset),
    noise), noise ~ N(0, 1)."""
    g = torch.Generator(device=device).manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, device=device)

    shape = (1, 2, seq_len, head_dim)
    q, k, v, do = rnd(*shape), rnd(*shape), rnd(*shape), rnd(*shape)
    q[..., 0] = (offset * head_dim) ** 0.5
    k[..., 0] = -(offset**0.5)
    return q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), do


@pytest.mark.points(2)
@CAUSAL
@pytest.mark.parametrize(("offset", "backward"), [(1000, False), (300, True)],
                         ids=["s-1000-forward", "s-300-backward"])
def test_scores_far_below_zero(offset, backward, causal, device, attention_grads):
    # A running max that starts at 0 instead of -inf underflows every exp(s - m) to 0 here
    # (fp32 exp underflows below -104). The oracles run in float64 on every device. The backward
    # is checked at -300: near s = -1000, fp32 resolves s to ~1e-4, so P is known to ~1e-4
    # relative, and the shared components of q and k (~sqrt(1000)) magnify that in dQ and dK
    # to about the tolerance, in any fp32 kernel (seen on an H200).
    q, k, v, do = _far_negative_qkv(offset, device)
    qd, kd, vd = q.detach(), k.detach(), v.detach()
    o, lse = flash_attn_forward(qd, kd, vd, causal=causal)
    with oracle():
        s = qd.double() @ kd.double().transpose(-1, -2) / 32**0.5
        assert -offset - 10 < s.min() and s.max() < -offset + 10  # the construction
        if causal:
            s = s.masked_fill(torch.ones_like(s[0, 0], dtype=torch.bool).triu(1), float("-inf"))
        ref_lse = torch.logsumexp(s, dim=-1)
    ref_o = sdpa_oracle(q, k, v, do, causal, work=torch.float64)[0]
    assert torch.isfinite(o).all() and torch.isfinite(lse).all()
    torch.testing.assert_close(o.double(), ref_o, rtol=1e-2, atol=1e-2)
    # LSE near -1000 in fp32 is spaced 6e-5 apart: an absolute tolerance, not a relative one.
    torch.testing.assert_close(lse.double(), ref_lse, rtol=0, atol=1e-3)
    if backward:
        _check_with_sdpa(q, k, v, do, causal, attention_grads, rtol=1e-2, atol=1e-2,
                         work=torch.float64)
