"""FP8 scaling: scales from amax, stored values against torch's cast, error against the rounding bound."""

import pytest
import torch
from hwnumerics import FP8_E4M3, dequantize, quantize_per_block, quantize_per_tensor


def error_bound(x: torch.Tensor, scale: torch.Tensor, fmt) -> torch.Tensor:
    """Round-to-nearest error of x ~ q * scale: half an ulp, i.e. unit_roundoff * |x| in the normal
    range, and at most half the subnormal spacing (scale * min_subnormal / 2) below it."""
    return fmt.unit_roundoff * x.abs() + scale * fmt.min_subnormal / 2


@pytest.mark.points(2)
def test_per_tensor_scale_maps_amax_to_448_and_values_match_torch(torch_ref):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 256, generator=gen) * 3.0
    q = quantize_per_tensor(x, FP8_E4M3)
    expected_scale = x.abs().amax() / 448.0  # float32
    assert q.scale.shape == () and q.block_size is None
    assert torch.equal(q.scale, expected_scale)
    assert torch.equal(q.bits, torch_ref.to_bits(x / expected_scale, FP8_E4M3))


@pytest.mark.points(2)
def test_per_tensor_dequantization_error_is_within_half_an_ulp():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(100_000, generator=gen)
    q = quantize_per_tensor(x, FP8_E4M3)
    err = (dequantize(q) - x).abs()
    # slack of 1e-6 relative for the float32 divide and multiply around the rounding
    assert (err <= error_bound(x, q.scale, FP8_E4M3) * (1 + 1e-6) + 1e-6 * x.abs()).all()


@pytest.mark.points(2)
def test_per_block_scales_come_from_each_blocks_own_amax(torch_ref):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(4, 512, generator=gen) * torch.logspace(-2, 2, 4).unsqueeze(1)
    q = quantize_per_block(x, block_size=128, fmt=FP8_E4M3)
    blocks = x.reshape(4, 4, 128)
    expected_scale = blocks.abs().amax(dim=-1) / 448.0  # (4, 4), float32
    assert q.scale.shape == (4, 4) and q.block_size == 128
    assert torch.equal(q.scale, expected_scale)
    expected_bits = torch_ref.to_bits(blocks / expected_scale.unsqueeze(-1), FP8_E4M3).reshape(4, 512)
    assert torch.equal(q.bits, expected_bits)
    err = (dequantize(q) - x).abs().reshape(4, 4, 128)
    bound = error_bound(blocks, expected_scale.unsqueeze(-1), FP8_E4M3)
    assert (err <= bound * (1 + 1e-6) + 1e-6 * blocks.abs()).all()
