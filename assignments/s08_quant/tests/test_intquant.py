"""Integer grids: codes, scales and zero points against the fp64 oracle, the round-trip bound."""

import pytest
import torch
from quant import IntQuantConfig, dequantize, fake_quant, qrange, quantize, quantize_codes

CASES = [  # (bits, symmetric, granularity, group_size)
    (8, True, "tensor", None),
    (8, True, "channel", None),
    (4, False, "channel", None),
    (4, False, "group", 32),
    (4, True, "group", 32),
]


@pytest.mark.points(1)
def test_qrange_is_symmetric_or_starts_at_zero(oracles):
    for bits in (2, 4, 8):
        for symmetric in (True, False):
            assert tuple(qrange(bits, symmetric)) == oracles.int_qrange(bits, symmetric)


@pytest.mark.points(2)
@pytest.mark.parametrize("bits, symmetric, granularity, group_size", CASES)
def test_codes_scales_and_zero_points_match_the_fp64_oracle(oracles, tol, bits, symmetric, granularity, group_size):
    gen = torch.Generator().manual_seed(bits * 10 + symmetric)
    x = torch.randn(6, 96, generator=gen, dtype=torch.float64) + 0.3  # off-centre: zero points matter
    cfg = IntQuantConfig(bits=bits, symmetric=symmetric, granularity=granularity, group_size=group_size)
    t = quantize(x, cfg)
    q, scale, zero, deq = oracles.int(x, bits, symmetric, granularity, group_size)
    assert t.q.dtype == torch.int32 and t.zero.dtype == torch.int32 and t.scale.dtype == torch.float64
    assert t.scale.shape == scale.shape and t.zero.shape == zero.shape
    # Same formulas in the same dtype: exact.
    torch.testing.assert_close(t.scale, scale, **tol("exact"))
    torch.testing.assert_close(t.zero.double(), zero, **tol("exact"))
    torch.testing.assert_close(t.q.double(), q, **tol("exact"))
    torch.testing.assert_close(dequantize(t), deq, **tol("exact"))


@pytest.mark.points(2)
@pytest.mark.parametrize("bits, symmetric, granularity, group_size", CASES)
def test_round_trip_error_is_at_most_half_a_step(bits, symmetric, granularity, group_size):
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(8, 128, generator=gen, dtype=torch.float64) * 3
    cfg = IntQuantConfig(bits=bits, symmetric=symmetric, granularity=granularity, group_size=group_size)
    t = quantize(x, cfg)
    err = (fake_quant(x, cfg) - x).abs()
    step = t.scale if granularity != "group" else t.scale.repeat_interleave(group_size, dim=-1)
    # Round to nearest: |x - deq| <= scale / 2; 1e-12 relative slack for the fp64 divide and multiply.
    assert (err <= step.expand_as(x) / 2 * (1 + 1e-12)).all()


@pytest.mark.points(1)
def test_codes_saturate_outside_the_grid():
    cfg = IntQuantConfig(bits=8, symmetric=True, granularity="tensor")
    x = torch.tensor([-1000.0, -127.6, -3.5, 2.5, 127.5, 1000.0], dtype=torch.float64)
    q = quantize_codes(x, torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.int32), cfg)
    # round half to even (-3.5 -> -4, 2.5 -> 2, 127.5 -> 128), then clamp to [-127, 127]
    assert q.tolist() == [-127, -127, -4, 2, 127, 127]


# Inputs (found by search) where x / scale and x * (1 / scale) round to different codes: the
# reciprocal is rounded once more, which moves a product sitting on .5 by one bit.
RECIPROCAL_CASES = [  # (dtype, x, codes of round(x / scale), scale = x[0] / 127)
    (torch.float64, [0.3, 0.005905511811023623], [127, 3]),
    (torch.float32, [0.22232575714588165, 0.04814140498638153], [127, 28]),
]


@pytest.mark.points(1)
@pytest.mark.parametrize("dtype, x, want", RECIPROCAL_CASES, ids=["float64", "float32"])
def test_codes_divide_by_the_scale_not_multiply_by_its_reciprocal(dtype, x, want):
    xt = torch.tensor(x, dtype=dtype)
    got = quantize(xt, IntQuantConfig(bits=8, symmetric=True, granularity="tensor")).q.tolist()
    scale = xt[0] / 127
    reciprocal = torch.round(xt * (1 / scale)).to(torch.int32).tolist()
    pitfall = (" Those are the codes of x * (1 / scale): the handout's pitfall. The reciprocal is rounded, so the "
               "product can land one bit off an exact .5; compute round(x / scale).") if got == reciprocal else ""
    assert got == want, (f"int8 symmetric per-tensor codes of {x} ({dtype}, scale = {x[0]} / 127): "
                         f"expected {want} (round(x / scale) = round({float(xt[1] / scale)!r})), got {got}.{pitfall}")


@pytest.mark.points(1)
def test_all_zero_group_gets_scale_one_and_no_nan():
    x = torch.zeros(3, 64, dtype=torch.float64)
    x[1] = torch.linspace(-1, 1, 64, dtype=torch.float64)
    for symmetric in (True, False):
        cfg = IntQuantConfig(bits=4, symmetric=symmetric, granularity="group", group_size=16)
        t = quantize(x, cfg)
        assert torch.equal(t.scale[0], torch.ones(4, dtype=torch.float64))
        assert torch.equal(fake_quant(x, cfg)[0], x[0])
        assert not fake_quant(x, cfg).isnan().any()
