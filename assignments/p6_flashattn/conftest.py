"""Shared by tests/ and hidden/: where kernels run, and the plain-PyTorch attention oracle.

Without a GPU, Triton kernels run in its interpreter on CPU tensors. TRITON_INTERPRET must be set
before triton is first imported; pytest loads this file before any test module imports the
package, so setting it here is early enough.
"""

import math
import os
from pathlib import Path

import pytest
import torch

from autograder.testing import in_worker, oracle, tolerances

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
# fp32 inputs are held to fp32 accuracy: by default tl.dot on fp32 uses TF32 tensor cores on GPUs
# (10-bit mantissa), which misses rtol = atol = 1e-2 on peaked scores. bf16/fp16 are unaffected.
os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")


def reference_attention(q, k, v, causal=False, sm_scale=None):
    """Textbook attention, materializing the scores: returns (o, lse), differentiable.

    Computes in float64 on the CPU and float32 on the GPU, whatever the input dtype; k and v
    (B, H_kv, N, d) are repeated to the H query heads. lse = logsumexp of the scaled, masked scores.
    Call it (and any backward through it) inside `oracle()`: its matmuls and softmax are ops the
    submission may not run, and outside the block they would be accounted to it.
    """
    work = torch.float64 if q.device.type == "cpu" else torch.float32
    group = q.shape[1] // k.shape[1]
    qw = q.to(work)
    kw = k.to(work).repeat_interleave(group, dim=1)
    vw = v.to(work).repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = qw @ kw.transpose(-1, -2) * scale
    if causal:
        n = q.shape[2]
        future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(future, float("-inf"))
    return torch.softmax(s, dim=-1) @ vw, torch.logsumexp(s, dim=-1)


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES


@pytest.fixture
def device() -> str:
    """The device small-shape tests run on: the GPU when there is one, else the CPU interpreter."""
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def attention_oracle():
    """reference_attention, for tests that compare against plain PyTorch."""
    return reference_attention


def make_qkv(batch, heads, kv_heads, seq_len, head_dim, dtype, device, seed=0, q_scale=1.0):
    """Seeded random q, k, v (leaf tensors that require grad) and an output gradient do."""
    g = torch.Generator(device=device).manual_seed(seed)

    def rnd(h, scale=1.0):
        x = scale * torch.randn(batch, h, seq_len, head_dim, generator=g, device=device)
        return x.to(dtype).requires_grad_()

    q, k, v = rnd(heads, q_scale), rnd(kv_heads), rnd(kv_heads)
    do = torch.randn(batch, heads, seq_len, head_dim, generator=g, device=device).to(dtype)
    return q, k, v, do


@pytest.fixture
def qkv_factory():
    """make_qkv(batch, heads, kv_heads, seq_len, head_dim, dtype, device, seed=0, q_scale=1.0)."""
    return make_qkv


def _close(actual, expected, rtol, atol, what):
    torch.testing.assert_close(actual.to(expected.dtype), expected, rtol=rtol, atol=atol,
                               msg=lambda m: f"{what}: {m}")


@in_worker
def flash_attention_grads(q, k, v, do, causal=False, sm_scale=None):
    """In the worker: flash_attention(q, k, v) and autograd's dQ, dK, dV for the output gradient do.

    The backward runs through the package's autograd Function, so it must run beside it: tensors
    reach the judge as copies without autograd history. Returns (o, dq, dk, dv), the worker's word.
    """
    from flashattn import flash_attention

    out = flash_attention(q, k, v, causal=causal, sm_scale=sm_scale)
    return (out.detach(), *torch.autograd.grad(out, (q, k, v), do))


@in_worker
def flash_attention_run(q, k, v, do, causal, backward):
    """In the worker: one call of flash_attention (and its backward, beside the autograd Function)
    without arguments, for `measure`; it returns (o,) or (o, dq, dk, dv)."""
    from flashattn import flash_attention

    q, k, v = (t.requires_grad_(backward) for t in (q, k, v))

    def run():
        o = flash_attention(q, k, v, causal=causal)
        return (o.detach(), *torch.autograd.grad(o, (q, k, v), do)) if backward else (o,)

    return run


def check_against_reference(q, k, v, do, *, causal, rtol, atol, sm_scale=None, backward=True):
    """Compare O, LSE (flash_attn_forward) and dQ, dK, dV (autograd through flash_attention, in the
    worker) with reference_attention computed here in higher precision from the same inputs."""
    from flashattn import flash_attn_forward

    qd, kd, vd = q.detach(), k.detach(), v.detach()
    o, lse = flash_attn_forward(qd, kd, vd, causal=causal, sm_scale=sm_scale)
    assert o.shape == q.shape and o.dtype == q.dtype, (o.shape, o.dtype)
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32, (lse.shape, lse.dtype)
    with oracle():
        ref_o, ref_lse = reference_attention(qd, kd, vd, causal, sm_scale)
    _close(o, ref_o, rtol, atol, "O")
    _close(lse, ref_lse, rtol, atol, "LSE")
    if not backward:
        return
    _, *grads = flash_attention_grads(q, k, v, do, causal=causal, sm_scale=sm_scale)
    assert len(grads) == 3, f"expected dQ, dK, dV, got {len(grads)} gradients"
    work = ref_o.dtype
    leaves = [t.detach().to(work).requires_grad_() for t in (q, k, v)]
    with oracle():
        ref_out, _ = reference_attention(*leaves, causal, sm_scale)
        ref_grads = torch.autograd.grad(ref_out, leaves, do.to(work))
    for name, g, rg, t in zip(("dQ", "dK", "dV"), grads, ref_grads, (q, k, v)):
        assert isinstance(g, torch.Tensor), (name, type(g))
        assert g.shape == t.shape and g.dtype == t.dtype, (name, g.shape, g.dtype)
        _close(g, rg, rtol, atol, name)


@pytest.fixture
def attention_check():
    """check_against_reference(q, k, v, do, *, causal, rtol, atol, sm_scale=None, backward=True)."""
    return check_against_reference


@pytest.fixture
def attention_grads():
    """flash_attention_grads(q, k, v, do, causal=False, sm_scale=None) -> (o, dq, dk, dv), run in
    the worker (the backward through the package's autograd Function)."""
    return flash_attention_grads
