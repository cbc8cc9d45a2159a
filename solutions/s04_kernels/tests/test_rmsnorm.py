"""Fused residual add + RMSNorm against plain PyTorch in fp32."""

import pytest
import torch
from autograder.testing import oracle

from tritonkernels import fused_add_rmsnorm


def rmsnorm_oracle(x, residual, weight, eps):
    """(out, new_residual) in plain torch: the add rounded to x.dtype, the norm in fp32."""
    with oracle():
        new_res = x + residual
        r = new_res.float()
        out = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        return out.to(x.dtype), new_res


def _inputs(shape, dtype, device, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape, generator=g, device=device).to(dtype)
    res = torch.randn(shape, generator=g, device=device).to(dtype)
    w = (1.0 + 0.1 * torch.randn(shape[-1], generator=g, device=device)).to(dtype)
    return x, res, w


@pytest.mark.points(2)
@pytest.mark.parametrize("shape", [(4, 64), (3, 5, 128)])
def test_fused_add_rmsnorm_matches_torch_fp32(shape, device, tol):
    x, res, w = _inputs(shape, torch.float32, device)
    out, new_res = fused_add_rmsnorm(x, res, w, eps=1e-6)
    ref_out, ref_res = rmsnorm_oracle(x, res, w, 1e-6)
    assert out.shape == x.shape and new_res.shape == x.shape
    torch.testing.assert_close(new_res, ref_res, **tol("residual sum"))
    torch.testing.assert_close(out, ref_out, **tol("rmsnorm, fp32"))


@pytest.mark.points(1)
def test_fused_add_rmsnorm_leaves_inputs_untouched(device, tol):
    x, res, w = _inputs((6, 32), torch.float32, device, seed=1)
    x0, res0 = x.clone(), res.clone()
    out, new_res = fused_add_rmsnorm(x, res, w, eps=1e-5)
    torch.testing.assert_close(new_res, x0 + res0, **tol("residual sum"))
    assert torch.equal(x, x0) and torch.equal(res, res0)
    assert out.data_ptr() not in (x.data_ptr(), res.data_ptr())


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.parametrize(("dtype", "name"), [(torch.float32, "rmsnorm, fp32"), (torch.bfloat16, "rmsnorm, bf16")])
def test_fused_add_rmsnorm_full_size_gpu(dtype, name, tol):
    # 16k tokens of a 4096-wide hidden state.
    x, res, w = _inputs((8, 2048, 4096), dtype, "cuda", seed=2)
    out, new_res = fused_add_rmsnorm(x, res, w, eps=1e-6)
    ref_out, ref_res = rmsnorm_oracle(x, res, w, 1e-6)
    torch.testing.assert_close(new_res, ref_res, **tol("residual sum"))
    torch.testing.assert_close(out, ref_out, **tol(name))
