"""The stored residual and the norm agree in half precision; strided views give contiguous results.

A tensor crosses between the judge and the worker as a contiguous copy, so every strided view
here is taken in the worker (the `in_worker` functions) from a base tensor the judge sent; the
oracles take the same views of the judge's copy.
"""

import pytest
import torch
import torch.nn.functional as F
from autograder.testing import in_worker, oracle

from tritonkernels import fused_add_rmsnorm, softmax, swiglu

HALF = pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
MANTISSA_BITS = {torch.float16: 10, torch.bfloat16: 7}


def _randn(shape, seed, device, dtype=torch.float32, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(shape, generator=g)).to(device=device, dtype=dtype)


def rmsnorm_oracle(x, residual, weight, eps):
    """(out, new_residual): the sum rounded to x.dtype first (torch's x + residual), then the
    norm of that rounded value in fp32, as the handout defines it (and HF / vLLM's fused
    add + RMSNorm compute it)."""
    with oracle():
        new_res = x + residual
        r = new_res.float()
        out = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        return out.to(x.dtype), new_res


# --- RMSNorm: the norm of the stored (rounded) residual ---------------------------------------

def _sums_that_round_to_powers_of_two(dtype, device, rows, n, seed, exact_per_row=4):
    """x = +-2^k (k in 5..8, one k per row); residual = +-d 2^k of the same sign, with d = 7/8 of
    half an ulp of 1, except `exact_per_row` entries of each row where residual = 0.

    Every sum rounds back to x, by round-to-nearest (the GPU, torch) and by truncation (Triton's
    CPU interpreter for bf16) alike; the mean square is then exactly 4^k (eps = 1e-6 vanishes
    next to it in fp32), so out = sign * weight exactly. A kernel that normalises the unrounded
    fp32 sum divides by a root mean square almost d (relative) too large: the entries whose
    residual is 0 come out low by almost d, up to 7/8 of an ulp of their weight, and most of the
    24 of them round to the next value below (all of them under truncation).
    """
    g = torch.Generator().manual_seed(seed)
    d = 2.0 ** -(MANTISSA_BITS[dtype] + 1) * 7 / 8
    sign = torch.where(torch.rand(rows, n, generator=g) < 0.5, -1.0, 1.0)
    x = sign * 2.0 ** torch.randint(5, 9, (rows, 1), generator=g).float()
    exact = torch.zeros(rows, n, dtype=torch.bool)
    for r in range(rows):
        exact[r, torch.randperm(n, generator=g)[:exact_per_row]] = True
    residual = torch.where(exact, 0.0, d * x)
    weight = (1.0 + 0.5 * torch.randn(n, generator=g)).to(dtype).float()  # fp32, exact in dtype
    return x.to(device, dtype), residual.to(device, dtype), weight.to(device)


@pytest.mark.points(2)
@HALF
def test_rmsnorm_normalizes_the_rounded_residual(dtype, device, tol):
    x, res, w = _sums_that_round_to_powers_of_two(dtype, device, rows=6, n=64, seed=100)
    out, new_res = fused_add_rmsnorm(x, res, w, eps=1e-6)
    ref_out, ref_res = rmsnorm_oracle(x, res, w, 1e-6)
    assert torch.equal(ref_res, x)  # the construction: every sum rounds back to x
    assert out.dtype == dtype and new_res.dtype == dtype
    torch.testing.assert_close(new_res, ref_res, **tol("exact by construction"))
    # Exact: the oracle is +-weight, representable in dtype; the bug moves entries by one ulp.
    torch.testing.assert_close(out, ref_out, **tol("exact by construction"))


# --- RMSNorm: a strided weight ----------------------------------------------------------------

def _weight_view(storage, how):
    return storage[::2] if how == "every_other" else storage[:, 1]


@in_worker
def rmsnorm_with_weight_view(x, residual, storage, how, eps):
    """In the worker: fused_add_rmsnorm with weight = storage[::2] or storage[:, 1], a view."""
    return fused_add_rmsnorm(x, residual, _weight_view(storage, how), eps=eps)


@pytest.mark.points(2)
@pytest.mark.parametrize(("how", "storage_shape"), [("every_other", (2 * 96,)),
                                                     ("column", (96, 3))])
def test_rmsnorm_reads_a_strided_weight_by_its_strides(how, storage_shape, device, tol):
    # The gain as a view of a larger tensor (a fused parameter buffer, a column of a table):
    # the handout promises strided inputs give the same result as contiguous ones.
    x, res = _randn((2, 3, 96), 110, device), _randn((2, 3, 96), 111, device)
    storage = _randn(storage_shape, 112, device) * 0.5 + 1.0
    out, new_res = rmsnorm_with_weight_view(x, res, storage, how, 1e-6)
    ref_out, ref_res = rmsnorm_oracle(x, res, _weight_view(storage, how), 1e-6)
    torch.testing.assert_close(new_res, ref_res, **tol("residual sum"))
    torch.testing.assert_close(out, ref_out, **tol("rmsnorm, fp32"))


# --- softmax: rows of a wider tensor ----------------------------------------------------------

@in_worker
def softmax_of_leading_columns(wide, width):
    """In the worker: softmax(wide[..., :width]), rows wide.shape[-1] elements apart."""
    return softmax(wide[..., :width])


@pytest.mark.points(2)
@pytest.mark.parametrize(("shape", "width"), [((6, 80), 72), ((2, 3, 130), 100),
                                              ((3, 8300), 8200)],
                         ids=["2d", "3d", "two-pass"])
def test_softmax_of_a_column_slice_fills_a_contiguous_output(shape, width, device, tol):
    # The logits of the first `width` classes of a wider head: the input's rows are
    # shape[-1] apart, the new output's rows `width` apart. Every entry is checked.
    wide = _randn(shape, 120, device, scale=3.0)
    y = softmax_of_leading_columns(wide, width)
    assert y.shape == (*shape[:-1], width)
    with oracle():
        ref = torch.softmax(wide[..., :width], dim=-1)
    torch.testing.assert_close(y, ref, **tol("softmax, fp32"))


# --- SwiGLU: permuted views -------------------------------------------------------------------

@in_worker
def swiglu_of_permuted_views(gate_base, up_base, dims):
    """In the worker: swiglu of gate_base.permute(dims) and up_base.permute(dims)."""
    return swiglu(gate_base.permute(*dims), up_base.permute(*dims))


@pytest.mark.points(2)
@pytest.mark.parametrize(("base_shape", "dims"), [((70, 5), (1, 0)), ((4, 6, 9), (1, 2, 0))],
                         ids=["transposed", "permuted"])
def test_swiglu_of_permuted_views_keeps_the_logical_layout(base_shape, dims, device, tol):
    # Gate and up as transposed / permuted views: the result is indexed like gate (same shape,
    # same values at each index), whatever the memory order of the inputs.
    gate_base = _randn(base_shape, 130, device, scale=3.0)
    up_base = _randn(base_shape, 131, device)
    y = swiglu_of_permuted_views(gate_base, up_base, dims)
    gate, up = gate_base.permute(*dims), up_base.permute(*dims)
    assert y.shape == gate.shape and y.dtype == gate.dtype
    with oracle():
        ref = F.silu(gate) * up
    torch.testing.assert_close(y, ref, **tol("swiglu, fp32"))
