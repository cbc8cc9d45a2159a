"""Integer grids, thoroughly: every bit width, ragged groups, 1-D and 3-D, float32, edge data."""

import pytest
import torch
from conftest import int_groups
from quant import IntQuantConfig, compute_qparams, dequantize, expand_params, fake_quant, quantize, quantize_codes


def check_against_oracle(x, cfg, oracles, tol):
    t = quantize(x, cfg)
    q, scale, zero, deq = oracles.int(x, cfg.bits, cfg.symmetric, cfg.granularity, cfg.group_size)
    assert t.scale.shape == scale.shape and t.scale.dtype == x.dtype and t.q.shape == x.shape
    torch.testing.assert_close(t.scale, scale, **tol("exact"))
    torch.testing.assert_close(t.zero.to(x.dtype), zero, **tol("exact"))
    torch.testing.assert_close(t.q.to(x.dtype), q, **tol("exact"))
    torch.testing.assert_close(dequantize(t), deq, **tol("exact"))
    torch.testing.assert_close(fake_quant(x, cfg), deq, **tol("exact"))


@pytest.mark.points(1)
@pytest.mark.parametrize("bits", [2, 3, 5, 6, 7, 8])
@pytest.mark.parametrize("symmetric", [True, False])
def test_every_bit_width_matches_the_oracle_with_a_ragged_last_group(oracles, tol, bits, symmetric):
    gen = torch.Generator().manual_seed(bits)
    x = torch.randn(5, 100, generator=gen, dtype=torch.float64) * 2 - 0.5  # K = 100: groups 32, 32, 32, 4
    check_against_oracle(x, IntQuantConfig(bits, symmetric, "group", 32), oracles, tol)


@pytest.mark.points(2)
def test_ragged_last_group_has_its_own_scale(oracles, tol):
    x = torch.randn(3, 70, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.01
    x[:, 64:] = torch.tensor([50.0, -20.0, 3.0, 1.0, 0.5, -7.0], dtype=torch.float64)
    for symmetric in (True, False):
        cfg = IntQuantConfig(4, symmetric, "group", 32)
        scale, zero = compute_qparams(x, cfg)
        assert scale.shape == (3, 3) and zero.shape == (3, 3)
        check_against_oracle(x, cfg, oracles, tol)
        # the small values of the first groups keep a fine grid: the outliers sit in group 3 only
        assert (scale[:, :2] < 0.01).all()


@pytest.mark.points(1)
@pytest.mark.parametrize("granularity, group_size", [("tensor", None), ("channel", None), ("group", 16)])
def test_three_dim_and_one_dim_inputs(oracles, tol, granularity, group_size):
    gen = torch.Generator().manual_seed(2)
    for shape in ((2, 3, 48), (48,)):
        x = torch.randn(*shape, generator=gen, dtype=torch.float64) + 0.2
        check_against_oracle(x, IntQuantConfig(4, False, granularity, group_size), oracles, tol)
        check_against_oracle(x, IntQuantConfig(8, True, granularity, group_size), oracles, tol)


@pytest.mark.points(2)
@pytest.mark.parametrize("symmetric", [True, False])
def test_float32_stays_float32_and_matches_the_oracle_in_float32(oracles, tol, symmetric):
    x = torch.randn(16, 256, generator=torch.Generator().manual_seed(3)) * 5
    check_against_oracle(x, IntQuantConfig(4, symmetric, "group", 64), oracles, tol)
    assert fake_quant(x, IntQuantConfig(8, symmetric, "channel")).dtype == torch.float32


@pytest.mark.points(2)
def test_zero_point_for_one_sided_and_off_centre_data(oracles, tol):
    cfg = IntQuantConfig(4, False, "channel")
    x = torch.tensor([[0.5, 1.0, 3.0, 2.0], [-3.0, -1.0, -0.25, -2.0], [-1.0, 0.0, 3.0, 1.0]], dtype=torch.float64)
    scale, zero = compute_qparams(x, cfg)
    # all positive: range [0, 3], zero 0; all negative: range [-3, 0], zero 15; [-1, 3]: zero round(3.75) = 4
    assert zero.flatten().tolist() == [0, 15, 4]
    torch.testing.assert_close(scale.flatten(), torch.tensor([3.0, 3.0, 4.0], dtype=torch.float64) / 15, **tol("exact"))
    check_against_oracle(x, cfg, oracles, tol)
    assert torch.equal(fake_quant(x, cfg)[2, 1], torch.tensor(0.0, dtype=torch.float64))  # 0 is on the grid


@pytest.mark.points(1)
def test_symmetric_grid_never_uses_the_most_negative_code():
    gen = torch.Generator().manual_seed(4)
    for bits in (2, 4, 8):
        cfg = IntQuantConfig(bits, True, "channel")
        x = -torch.rand(6, 40, generator=gen, dtype=torch.float64) * 9  # the negative end is the amax
        t = quantize(x, cfg)
        assert t.q.min() == -(2 ** (bits - 1) - 1)
        big = quantize_codes(x * 100, t.scale, t.zero, cfg)  # far outside the grid
        assert big.min() == -(2 ** (bits - 1) - 1)


@pytest.mark.points(1)
def test_asymmetric_codes_saturate_at_zero_and_two_to_the_bits_minus_one():
    cfg = IntQuantConfig(4, False, "tensor")
    x = torch.tensor([-10.0, -1.5, -1.25, 0.0, 6.0, 10.0], dtype=torch.float64)
    q = quantize_codes(x, torch.tensor([0.5], dtype=torch.float64), torch.tensor([3], dtype=torch.int32), cfg)
    # round(x / 0.5) + 3, half to even (-2.5 -> -2), clamped to [0, 15]
    assert q.tolist() == [0, 0, 1, 3, 15, 15]


@pytest.mark.points(1)
def test_constant_and_zero_groups():
    x = torch.zeros(4, 32, dtype=torch.float64)
    x[1] = 5.0
    x[2] = -5.0
    for symmetric in (True, False):
        cfg = IntQuantConfig(3, symmetric, "group", 8)
        out = fake_quant(x, cfg)
        assert not out.isnan().any()
        torch.testing.assert_close(out, x, rtol=1e-12, atol=0)  # the group's amax is on the grid
        scale, zero = compute_qparams(x, cfg)
        assert torch.equal(scale[0], torch.ones(4, dtype=torch.float64))
        assert torch.equal(zero[0], torch.zeros(4, dtype=torch.int32))


@pytest.mark.points(1)
def test_expand_params_covers_every_element():
    cfg = IntQuantConfig(4, True, "group", 4)
    p = torch.arange(6, dtype=torch.float64).reshape(2, 3)  # K = 10: groups of 4, 4, 2
    full = expand_params(p, (2, 10), cfg)
    assert full.tolist() == [[0.0] * 4 + [1.0] * 4 + [2.0] * 2, [3.0] * 4 + [4.0] * 4 + [5.0] * 2]


@pytest.mark.points(1)
def test_quantize_refuses_integer_and_zero_dim_inputs():
    cfg = IntQuantConfig()
    assert quantize(torch.arange(8, dtype=torch.float32)[None], cfg) is not None  # the same values as floats quantize
    with pytest.raises(ValueError):
        quantize(torch.arange(8), cfg)
    with pytest.raises(ValueError):
        quantize(torch.tensor(1.0), cfg)


# Asymmetric inputs where -lo / scale is an exact tie k + 0.5 with k even, in every group: the
# handout's torch.round (half to even) gives zero = k, a hand-rolled floor(v + 0.5) gives k + 1 and
# shifts every code by one (the dequantized values agree: only the zero point and the codes tell).
# Derived by hand from the handout's formulas (scale = (hi - lo) / qmax, zero = round(-lo / scale)):
ZERO_POINT_TIES = [
    # (bits, granularity, group_size, x)                     scale, -lo / scale -> zero, per group
    (8, "channel", None, [[-1.0, 509.0, 3.0]]),                        # 510 / 255 = 2, 0.5 -> 0
    (8, "tensor", None, [[-5.0, 505.0], [1.0, 2.5]]),                  # 2, 2.5 -> 2
    (4, "channel", None, [[-1.0, 5.0, 0.3, 2.0]]),                     # 6 / 15, 2.5 once rounded -> 2
    (4, "group", 4, [[-2.5, 12.5, 0.5, 1.5, -4.5, 10.5, 1.0, 7.0]]),  # 1, 2.5 -> 2 | 1, 4.5 -> 4
    (2, "channel", None, [[-0.5, 2.5, 1.0], [-2.5, 0.5, -1.5]]),       # 1, 0.5 -> 0 | 1, 2.5 -> 2
]


def tie_quotients(x, scale, granularity, group_size):
    """-lo / scale of every group, in x's dtype (the test's own check that each case is a tie)."""
    out = []
    for elems, sidx in int_groups(tuple(x.shape), granularity, group_size):
        lo = torch.clamp(x[elems].min(), max=0)
        out.append(float(-lo / scale[sidx]))
    return out


@pytest.mark.points(2)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_zero_point_ties_round_half_to_even(oracles, dtype):
    for bits, granularity, group_size, rows in ZERO_POINT_TIES:
        x = torch.tensor(rows, dtype=dtype)
        q, scale, zero, _ = oracles.int(x, bits, False, granularity, group_size)  # torch.round, group by group
        quotients = tie_quotients(x, scale, granularity, group_size)
        assert all(v % 2 == 0.5 for v in quotients), f"test data: {rows} gives -lo / scale = {quotients}, not k + 0.5 (k even)"
        where = f"quantize(x={rows}, {dtype}, int{bits} asymmetric, {granularity}" + (f" {group_size})" if group_size else ")")
        t = quantize(x, IntQuantConfig(bits, False, granularity, group_size))
        assert torch.equal(t.zero.to(dtype), zero), (
            f"{where}: zero point {t.zero.flatten().tolist()}, expected {zero.flatten().int().tolist()}: -lo / scale "
            f"is {quotients}, an exact tie, and torch.round rounds half to even (0.5 -> 0, 2.5 -> 2)")
        assert torch.equal(t.q.to(dtype), q), (
            f"{where}: codes {t.q.tolist()}, expected {q.int().tolist()} = round(x / scale) + zero with zero "
            f"{zero.flatten().int().tolist()}")
