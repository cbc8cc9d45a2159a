"""Fused Triton kernels for the LLaMA layers on CUDA (given: fewer, larger kernels per decode step).

A decode step of a small model is bound by how many kernels it runs, not by the bytes they move: the
eager RMSNorm is ~7 kernels, RoPE ~5 per tensor, SwiGLU's activation 2. These kernels do each in
one, with the rounding of the eager bf16 code (HF's): every eager op rounds its result to the
activation dtype, so each kernel rounds at the same points, and the tokens stay those of HF.
They run under TRITON_INTERPRET=1 on CPU too, which is how they are checked without a GPU.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch import Tensor
from triton.language.extra import libdevice


@triton.jit
def _rms_norm_kernel(X, R, W, Y, S, stride_x, stride_r, stride_y, stride_s, n, eps,
                     HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0)
    if HAS_RESIDUAL:  # s = x + residual, rounded like the eager add; it is the next residual
        r = tl.load(R + row * stride_r + cols, mask=mask, other=0.0)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(X.dtype.element_ty)
        tl.store(S + row * stride_s + cols, x, mask=mask)
    h = x.to(tl.float32)
    h = (h * tl.rsqrt(tl.sum(h * h, axis=0) / n + eps)).to(X.dtype.element_ty)
    w = tl.load(W + cols, mask=mask, other=0.0)
    tl.store(Y + row * stride_y + cols, (w.to(tl.float32) * h.to(tl.float32)).to(Y.dtype.element_ty), mask=mask)


def rms_norm(x: Tensor, weight: Tensor, eps: float, residual: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """x, residual: (T, hidden). Returns (weight * norm(s), s) with s = x + residual (or x alone)."""
    if x.stride(-1) != 1 or (residual is not None and residual.stride(-1) != 1):
        raise ValueError("rms_norm needs rows with unit stride")
    t, n = x.shape
    y = torch.empty_like(x)
    s = torch.empty_like(x) if residual is not None else x
    r = residual if residual is not None else x
    _rms_norm_kernel[(t,)](x, r, weight, y, s, x.stride(0), r.stride(0), y.stride(0), s.stride(0), n, eps,
                           HAS_RESIDUAL=residual is not None, BLOCK=triton.next_power_of_2(n))
    return y, s


@triton.jit
def _rope_kernel(X, Cos, Sin, O, stride_t, stride_h, stride_c, heads,
                 HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr, NO_FMA: tl.constexpr):
    t = tl.program_id(0)
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, HEAD_DIM)
    half: tl.constexpr = HEAD_DIM // 2
    rot = (d + half) % HEAD_DIM  # rotate_half: [-x2, x1]
    mask = (h < heads)[:, None]
    offs = t * stride_t + h[:, None] * stride_h
    x = tl.load(X + offs + d[None, :], mask=mask, other=0.0)
    xr = tl.load(X + offs + rot[None, :], mask=mask, other=0.0)
    xr = tl.where((d < half)[None, :], -xr, xr)
    cos = tl.load(Cos + t * stride_c + d)
    sin = tl.load(Sin + t * stride_c + d)
    dt = X.dtype.element_ty
    # x * cos + rotate_half(x) * sin, each op rounded to dt as eager. On a GPU, mul_rn/add_rn forbid
    # fusing a product into the add (an FMA skips the product's rounding: on an H200 24% of bf16
    # outputs differed); the interpreter (numpy) never fuses, and has no libdevice.
    x, xr = x.to(tl.float32), xr.to(tl.float32)
    cos, sin = cos.to(tl.float32)[None, :], sin.to(tl.float32)[None, :]
    if NO_FMA:
        a = libdevice.mul_rn(x, cos).to(dt).to(tl.float32)
        b = libdevice.mul_rn(xr, sin).to(dt).to(tl.float32)
        out = libdevice.add_rn(a, b)
    else:
        out = (x * cos).to(dt).to(tl.float32) + (xr * sin).to(dt).to(tl.float32)
    tl.store(O + offs + d[None, :], out.to(dt), mask=mask)


def rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x (T, heads, head_dim) rotated by cos, sin (T, 1, head_dim), HF's rotate-half convention."""
    t, heads, dim = x.shape
    if not x.is_contiguous() or dim & (dim - 1):
        raise ValueError("rope needs a contiguous x with a power-of-two head_dim")
    cos, sin = cos.reshape(t, dim), sin.reshape(t, dim)
    out = torch.empty_like(x)
    _rope_kernel[(t,)](x, cos, sin, out, x.stride(0), x.stride(1), cos.stride(0), heads,
                       HEAD_DIM=dim, BLOCK_H=triton.next_power_of_2(heads),
                       NO_FMA=os.environ.get("TRITON_INTERPRET") != "1")
    return out


@triton.jit
def _silu_mul_kernel(G, U, O, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    g = tl.load(G + i, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(U + i, mask=mask, other=0.0)
    act = (g / (1.0 + tl.exp(-g))).to(u.dtype)  # F.silu, rounded as eager
    tl.store(O + i, (act.to(tl.float32) * u.to(tl.float32)).to(u.dtype), mask=mask)


def silu_mul(gate: Tensor, up: Tensor) -> Tensor:
    """silu(gate) * up for contiguous tensors of one shape."""
    if not (gate.is_contiguous() and up.is_contiguous()) or gate.shape != up.shape:
        raise ValueError("silu_mul needs contiguous tensors of one shape")
    out = torch.empty_like(up)
    n = up.numel()
    _silu_mul_kernel[(triton.cdiv(n, 1024),)](gate, up, out, n, BLOCK=1024)
    return out
