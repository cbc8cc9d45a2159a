"""Hidden: fp8 scaling edge cases and the measured error against rounding theory."""

import math

import pytest
import torch
from hwnumerics import FP8_E4M3, FP8_E5M2, dequantize, quantize_per_block, quantize_per_tensor


def uniform_mantissa_values(n: int, lo_exp: int, hi_exp: int, gen) -> torch.Tensor:
    """x = +-2**k * t, k uniform in [lo_exp, hi_exp], t uniform in [1, 2): uniform mantissas."""
    k = torch.randint(lo_exp, hi_exp + 1, (n,), generator=gen).float()
    t = 1 + torch.rand(n, generator=gen)
    sign = torch.randint(0, 2, (n,), generator=gen).float() * 2 - 1
    return sign * torch.exp2(k) * t


@pytest.mark.points(3)
@pytest.mark.parametrize("fmt", [FP8_E4M3, FP8_E5M2], ids=["e4m3", "e5m2"])
def test_relative_rms_error_matches_rounding_theory(fmt):
    # Rounding to m mantissa bits leaves an error uniform on +-ulp/2 with ulp = 2**(e - m), so the
    # mean squared relative error is E[ulp**2 / 12 / x**2] = 2**(-2m) / 12 * E[1 / t**2] and
    # E[1 / t**2] = 1/2 for t uniform in [1, 2): relative RMS = 2**-m / sqrt(24).
    gen = torch.Generator().manual_seed(3)
    x = uniform_mantissa_values(1_000_000, -4, 6, gen)  # |x| in [2**-4, 2**7): normal after scaling
    x[0] = fmt.max_finite  # amax = max_finite, so scale = 1 and no value leaves the normal range
    q = quantize_per_tensor(x, fmt)
    assert q.scale.item() == 1.0
    rel = ((dequantize(q) - x) / x)[1:]
    measured = rel.pow(2).mean().sqrt().item()
    theory = 2.0**-fmt.man_bits / math.sqrt(24)  # e4m3: 0.0255; e5m2: 0.0510
    assert measured == pytest.approx(theory, rel=0.03)  # 1M samples: statistical error ~0.2%


@pytest.mark.points(2)
def test_per_block_error_beats_per_tensor_when_one_block_holds_an_outlier():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(8, 1024, generator=gen) * 0.01
    x[3, 17] = 1000.0  # per-tensor scale 1000/448 pushes the other values into e4m3 subnormals
    others = torch.ones_like(x, dtype=torch.bool)
    others[3, :128] = False  # every block but the outlier's

    def relative_rms(q):
        err = (dequantize(q) - x)[others]
        return (err.pow(2).mean() / x[others].pow(2).mean()).sqrt().item()

    per_tensor = relative_rms(quantize_per_tensor(x, FP8_E4M3))  # measured ~0.127
    per_block = relative_rms(quantize_per_block(x, 128, FP8_E4M3))  # measured ~0.026
    assert per_block == pytest.approx(2.0**-3 / math.sqrt(24), rel=0.1)  # theory for normal values
    assert per_block < per_tensor / 3


@pytest.mark.points(2)
def test_all_zero_block_gets_unit_scale_and_dequantizes_to_zero():
    x = torch.zeros(2, 256)
    x[1, 128:] = torch.linspace(-1, 1, 128)
    q = quantize_per_block(x, 128, FP8_E4M3)
    expected = torch.ones(2, 2)
    expected[1, 1] = x[1, 128:].abs().amax() / 448.0  # = 1 / 448 in float32
    assert torch.equal(q.scale, expected)
    out = dequantize(q)
    assert torch.isfinite(out).all()
    assert torch.equal(out[0], torch.zeros(256)) and torch.equal(out[1, :128], torch.zeros(128))
    assert torch.equal(dequantize(quantize_per_tensor(torch.zeros(5))), torch.zeros(5))


@pytest.mark.points(2)
def test_per_block_on_a_3d_tensor_matches_torch(torch_ref):
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 256, generator=gen) * torch.tensor([1e-3, 1.0, 1e3]).view(1, 3, 1)
    q = quantize_per_block(x, 64, FP8_E5M2)
    blocks = x.reshape(2, 3, 4, 64)
    scale = blocks.abs().amax(dim=-1) / 57344.0
    assert torch.equal(q.scale, scale)
    assert torch.equal(q.bits, torch_ref.to_bits(blocks / scale.unsqueeze(-1), FP8_E5M2).reshape(2, 3, 256))
    assert dequantize(q).shape == (2, 3, 256)


@pytest.mark.points(1)
def test_quantize_rejects_bad_inputs():
    assert quantize_per_block(torch.ones(2, 8), 4).scale.shape == (2, 2)
    with pytest.raises(ValueError):
        quantize_per_block(torch.ones(2, 10), 4)  # 10 is not a multiple of 4
    for block_size in (0, -4):  # not a block size: ValueError, not a division by zero or a bad reshape
        with pytest.raises(ValueError):
            quantize_per_block(torch.ones(2, 8), block_size)
    with pytest.raises(ValueError):
        quantize_per_block(torch.tensor(1.0), 1)  # a 0-dim tensor has no last dim to cut into blocks
    with pytest.raises(ValueError):
        quantize_per_tensor(torch.tensor([1.0, float("inf")]))


def e4m3_midpoints() -> torch.Tensor:
    """The 126 midpoints between consecutive non-negative e4m3 values (0 .. 448), as float32."""
    values = torch.arange(0, 0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn).float()  # torch's decode
    return (values[:-1] + values[1:]) / 2


def near_midpoints(amax: float) -> torch.Tensor:
    """128 float32 values of amax 448 * scale whose quotients x / scale land on or within a float32
    ulp of e4m3 rounding midpoints (x = midpoint * scale, rounded), positive and negative."""
    amax_t = torch.tensor(amax, dtype=torch.float32)
    mids = e4m3_midpoints() * (amax_t / 448.0)  # (126,)
    return torch.cat([amax_t[None], mids[::2], -mids[1::2], torch.zeros(1)])  # (128,)


# amax values (random, and two tiny ones) whose scales amax / 448 have inexact reciprocals: for some
# midpoints, x * (1 / scale) is rounded twice and lands on the other side of the midpoint than the
# correctly rounded x / scale (the tests check that such inputs are present).
_AMAX_GEN = torch.Generator().manual_seed(0)
MIDPOINT_AMAXES = [1 + 1000 * u for u in torch.rand(6, generator=_AMAX_GEN).tolist()] + [3.0517578125e-05, 1.7e-3]


@pytest.mark.points(1)
def test_per_tensor_values_at_rounding_midpoints_are_divided_by_the_scale(torch_ref):
    # Oracle: torch's e4m3fn cast of x / scale, the division correctly rounded in float32.
    reciprocal_differs = 0
    for amax in MIDPOINT_AMAXES:
        x = near_midpoints(amax)
        scale = x.abs().amax() / 448.0
        q = quantize_per_tensor(x, FP8_E4M3)
        assert torch.equal(q.scale, scale)
        expected = torch_ref.to_bits(x / scale, FP8_E4M3)
        assert torch.equal(q.bits, expected), f"amax {amax}: {int((q.bits != expected).sum())} values differ"
        reciprocal_differs += int((torch_ref.to_bits(x * (1 / scale), FP8_E4M3) != expected).sum())
    assert reciprocal_differs > 0, "test setup: no input separates x / scale from x * (1 / scale)"


@pytest.mark.points(1)
def test_per_block_values_at_rounding_midpoints_are_divided_by_the_scale(torch_ref):
    x = torch.stack([near_midpoints(amax) for amax in MIDPOINT_AMAXES]).reshape(2, 512)  # 4 blocks a row
    q = quantize_per_block(x, 128, FP8_E4M3)
    blocks = x.reshape(2, 4, 128)
    scale = blocks.abs().amax(dim=-1, keepdim=True) / 448.0  # (2, 4, 1)
    assert torch.equal(q.scale, scale.squeeze(-1))
    expected = torch_ref.to_bits(blocks / scale, FP8_E4M3)
    bits = q.bits.reshape(2, 4, 128)
    assert torch.equal(bits, expected), f"{int((bits != expected).sum())} values differ"
    assert (torch_ref.to_bits(blocks * (1 / scale), FP8_E4M3) != expected).any(), "test setup: no separating input"
