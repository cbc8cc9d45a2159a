"""Shared by tests/ and hidden/: where kernels run, and the plain-PyTorch attention oracle.

Without a GPU, Triton kernels run in its interpreter on CPU tensors. TRITON_INTERPRET must be set
before triton is first imported; pytest loads this file before any test module imports the
package, so setting it here is early enough.
"""

import itertools
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


# --- sequences with lengths of their own: N_q != N_k and packed (varlen) batches -----------------

def bottom_right_causal_mask(len_q, len_k, device):
    """(len_q, len_k) bool, True where query i may attend key j: j <= i + len_k - len_q
    (FlashAttention 2.1+; SDPA's is_causal aligns top-left, j <= i, so tests pass this mask)."""
    i = torch.arange(len_q, device=device)[:, None]
    j = torch.arange(len_k, device=device)[None, :]
    return j <= i + (len_k - len_q)


def first_row_with_a_key(len_q, len_k, causal):
    """Rows before it see no key: under bottom-right causal the first len_q - len_k rows (when
    len_q > len_k), every row when there is no key at all."""
    if len_k == 0:
        return len_q
    return max(0, len_q - len_k) if causal else 0


def sdpa_sequence_oracle(q, k, v, do, causal, sm_scale=None):
    """One sequence, q (H, L_q, d), k and v (H_kv, L_k, d), do like q, in float64 on the CPU
    (float32 on the GPU): SDPA with an explicit mask (bottom-right causal) and autograd.

    Returns (o, lse, dq, dk, dv) under FlashAttention's convention for a query with no key:
    o = 0, lse = +inf, zero gradients. Only the rows that see a key go through SDPA (torch's
    output on a fully masked row has changed across versions and backends); the others are set
    here. Call inside `oracle()`.
    """
    import torch.nn.functional as F

    work = torch.float64 if q.device.type == "cpu" else torch.float32
    leaves = [t.detach().to(work).requires_grad_() for t in (q, k, v)]
    (h, len_q, d), len_k = q.shape, k.shape[1]
    first = first_row_with_a_key(len_q, len_k, causal)
    scale = 1.0 / math.sqrt(d) if sm_scale is None else sm_scale
    allowed = (bottom_right_causal_mask(len_q, len_k, q.device) if causal
               else torch.ones(len_q, len_k, dtype=torch.bool, device=q.device))[first:]
    o = leaves[0].new_zeros(h, len_q, d)
    lse = leaves[0].new_full((h, len_q), float("inf")).detach()
    if first < len_q:
        q_seen = leaves[0][:, first:]
        o_seen = F.scaled_dot_product_attention(q_seen[None], leaves[1][None], leaves[2][None],
                                                attn_mask=allowed, scale=scale,
                                                enable_gqa=True)[0]
        o = torch.cat([o[:, :first], o_seen], dim=1)
        group = h // k.shape[0]
        s = q_seen.detach() @ leaves[1].detach().repeat_interleave(group, 0).transpose(-1, -2)
        lse[:, first:] = torch.logsumexp((s * scale).masked_fill(~allowed, float("-inf")), -1)
    grads = (torch.autograd.grad(o, leaves, do.to(work), allow_unused=True) if o.requires_grad
             else [None] * 3)  # no row sees a key: nothing reaches q, k or v
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, leaves)]
    return (o.detach(), lse, *grads)


@pytest.fixture
def sequence_oracle():
    """sdpa_sequence_oracle(q, k, v, do, causal, sm_scale=None) -> (o, lse, dq, dk, dv) of one
    sequence (q (H, L_q, d)), bottom-right causal, FlashAttention's convention for empty rows."""
    return sdpa_sequence_oracle


def make_packed(lens_q, lens_k, heads, kv_heads, head_dim, dtype, device, seed=0, offset=0.5):
    """Seeded packed batch: q, do (total_q, H, d), k, v (total_k, H_kv, d) (leaves requiring grad)
    and int32 cu_seqlens_q, cu_seqlens_k on device. Sequence b's values are offset by offset * b,
    so a kernel that reads a neighbour's rows gets different numbers."""
    g = torch.Generator(device=device).manual_seed(seed)

    def packed(lens, h):
        parts = [torch.randn(n, h, head_dim, generator=g, device=device) + offset * b
                 for b, n in enumerate(lens)]
        return torch.cat(parts) if parts else torch.empty(0, h, head_dim, device=device)

    q, k, v = packed(lens_q, heads), packed(lens_k, kv_heads), packed(lens_k, kv_heads)
    do = torch.randn(sum(lens_q), heads, head_dim, generator=g, device=device)

    def cu(lens):
        return torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32, device=device)

    q, k, v = (t.to(dtype).requires_grad_() for t in (q, k, v))
    return q, k, v, do.to(dtype), cu(lens_q), cu(lens_k)


@pytest.fixture
def packed_factory():
    """make_packed(lens_q, lens_k, heads, kv_heads, head_dim, dtype, device, seed=0, offset=0.5)
    -> (q, k, v, do, cu_seqlens_q, cu_seqlens_k)."""
    return make_packed


def packed_oracle(q, k, v, do, lens_q, lens_k, causal, sm_scale=None):
    """sdpa_sequence_oracle over each sequence of a packed batch, concatenated back:
    (o (total_q, H, d), lse (H, total_q), dq, dk, dv) in the oracle's precision."""
    cut = [0, *itertools.accumulate(lens_q)], [0, *itertools.accumulate(lens_k)]
    outs = []
    with oracle():
        for b in range(len(lens_q)):
            (q0, q1), (k0, k1) = cut[0][b:b + 2], cut[1][b:b + 2]
            seq = [t.detach().transpose(0, 1) for t in (q[q0:q1], k[k0:k1], v[k0:k1], do[q0:q1])]
            outs.append(sdpa_sequence_oracle(*seq, causal, sm_scale))
        o, lse, dq, dk, dv = (torch.cat(parts, dim=1) for parts in zip(*outs))
        return (o.transpose(0, 1), lse, dq.transpose(0, 1), dk.transpose(0, 1),
                dv.transpose(0, 1))


@pytest.fixture
def packed_reference():
    """packed_oracle(q, k, v, do, lens_q, lens_k, causal, sm_scale=None)
    -> (o, lse, dq, dk, dv) of a packed batch, SDPA sequence by sequence."""
    return packed_oracle


@in_worker
def flash_attention_varlen_grads(q, k, v, do, cu_q, cu_k, max_q, max_k, causal=False,
                                 sm_scale=None):
    """In the worker: flash_attention_varlen and autograd's dq, dk, dv for do (beside the package's
    autograd Function). Returns (o, dq, dk, dv), the worker's word."""
    from flashattn import flash_attention_varlen

    o = flash_attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=causal,
                               softmax_scale=sm_scale)
    return (o.detach(), *torch.autograd.grad(o, (q, k, v), do))


def check_packed(q, k, v, do, cu_q, cu_k, lens_q, lens_k, *, causal, rtol, atol, sm_scale=None,
                 backward=True, what=""):
    """O and LSE (flash_attn_varlen_forward) and dq, dk, dv (autograd through
    flash_attention_varlen) of a packed batch against SDPA run sequence by sequence."""
    from flashattn import flash_attn_varlen_forward

    case = f"{what} lens_q={list(lens_q)} lens_k={list(lens_k)} causal={causal}"
    max_q, max_k = max(lens_q, default=0), max(lens_k, default=0)
    qd, kd, vd = q.detach(), k.detach(), v.detach()
    o, lse = flash_attn_varlen_forward(qd, kd, vd, cu_q, cu_k, max_q, max_k, causal=causal,
                                       sm_scale=sm_scale)
    ref_o, ref_lse, *ref_grads = packed_oracle(q, k, v, do, lens_q, lens_k, causal, sm_scale)
    assert o.shape == q.shape and lse.shape == (q.shape[1], q.shape[0]), (o.shape, lse.shape)
    _close(o, ref_o, rtol, atol, f"O ({case})")
    _close(lse, ref_lse, rtol, atol, f"LSE ({case}; +inf on rows with no key)")
    if not backward:
        return
    _, *grads = flash_attention_varlen_grads(q, k, v, do, cu_q, cu_k, max_q, max_k, causal,
                                             sm_scale)
    for name, g, rg in zip(("dQ", "dK", "dV"), grads, ref_grads):
        _close(g, rg, rtol, atol, f"{name} ({case})")


@pytest.fixture
def packed_check():
    """check_packed(q, k, v, do, cu_q, cu_k, lens_q, lens_k, *, causal, rtol, atol,
    sm_scale=None, backward=True, what="")."""
    return check_packed


def check_unequal_lengths(q, k, v, do, *, causal, rtol, atol, sm_scale=None, backward=True):
    """O, LSE (flash_attn_forward) and dQ, dK, dV (autograd through flash_attention) of a
    fixed-length batch with N_q != N_k against SDPA with the bottom-right mask, batch by batch."""
    from flashattn import flash_attn_forward

    case = f"N_q={q.shape[2]} N_k={k.shape[2]} causal={causal}"
    qd, kd, vd = q.detach(), k.detach(), v.detach()
    o, lse = flash_attn_forward(qd, kd, vd, causal=causal, sm_scale=sm_scale)
    assert o.shape == q.shape and lse.shape == q.shape[:3], (o.shape, lse.shape)
    with oracle():
        refs = [sdpa_sequence_oracle(q[b], k[b], v[b], do[b], causal, sm_scale)
                for b in range(q.shape[0])]
    ref_o, ref_lse, *ref_grads = (torch.stack(parts) for parts in zip(*refs))
    _close(o, ref_o, rtol, atol, f"O ({case})")
    _close(lse, ref_lse, rtol, atol, f"LSE ({case}; +inf on rows with no key)")
    if not backward:
        return
    _, *grads = flash_attention_grads(q, k, v, do, causal=causal, sm_scale=sm_scale)
    for name, g, rg in zip(("dQ", "dK", "dV"), grads, ref_grads):
        _close(g, rg, rtol, atol, f"{name} ({case})")


@pytest.fixture
def unequal_check():
    """check_unequal_lengths(q, k, v, do, *, causal, rtol, atol, sm_scale=None, backward=True)."""
    return check_unequal_lengths
