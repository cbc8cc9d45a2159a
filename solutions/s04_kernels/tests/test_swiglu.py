"""Fused SwiGLU against silu(gate) * up in PyTorch."""

import pytest
import torch
import torch.nn.functional as F
from autograder.testing import oracle

from tritonkernels import swiglu


def swiglu_oracle(gate, up):
    """silu(gate) * up in plain torch, inside oracle()."""
    with oracle():
        return F.silu(gate) * up


@pytest.mark.points(2)
@pytest.mark.parametrize("shape", [(8, 64), (3, 7, 96)])
def test_swiglu_matches_torch_fp32(shape, device, tol):
    g = torch.Generator().manual_seed(0)
    gate = (3 * torch.randn(shape, generator=g)).to(device)
    up = torch.randn(shape, generator=g).to(device)
    y = swiglu(gate, up)
    assert y.shape == gate.shape and y.dtype == gate.dtype
    torch.testing.assert_close(y, swiglu_oracle(gate, up), **tol("swiglu, fp32"))


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.parametrize(("dtype", "name"), [(torch.float32, "swiglu, fp32"), (torch.bfloat16, "swiglu, bf16")])
def test_swiglu_full_size_gpu(dtype, name, tol):
    # 16k tokens of a 14336-wide MLP (LLaMA-3 8B).
    g = torch.Generator(device="cuda").manual_seed(1)
    gate = torch.randn(16384, 14336, generator=g, device="cuda").to(dtype)
    up = torch.randn(16384, 14336, generator=g, device="cuda").to(dtype)
    ref = swiglu_oracle(gate.float(), up.float()).to(dtype)
    torch.testing.assert_close(swiglu(gate, up), ref, **tol(name))
