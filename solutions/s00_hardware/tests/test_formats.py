"""float32 -> bf16 / fp16 / fp8 conversions from the bit patterns, against torch's own casts."""

import math

import pytest
import torch
from hwnumerics import BF16, FP8_E4M3, FP8_E5M2, FP16, to_bits

ALL_FORMATS = [BF16, FP16, FP8_E4M3, FP8_E5M2]
FORMAT_IDS = [f.name for f in ALL_FORMATS]


def special_values(fmt) -> torch.Tensor:
    """Zeros, ties, subnormals, the overflow edge, infinities and NaN, with both signs."""
    m, tiny = fmt.man_bits, fmt.min_subnormal
    ulp_at_max = 2.0 ** (math.floor(math.log2(fmt.max_finite)) - m)
    half_ulp_at_1 = 2.0 ** -(m + 1)
    values = [
        0.0, 1.0, 3.0, fmt.min_normal, tiny,
        tiny / 2,                          # tie between 0 and the smallest subnormal -> 0 (even)
        tiny * 0.75,                       # above that tie -> smallest subnormal
        tiny * 1.5, tiny * 2.5,            # subnormal ties -> 2 * tiny (even mantissa) both times
        fmt.min_normal - tiny / 2,         # tie between the largest subnormal and min normal -> min normal
        1 + half_ulp_at_1,                 # tie -> 1.0 (even)
        1 + 3 * half_ulp_at_1,             # tie -> 1 + 2 ulp (even)
        1 + half_ulp_at_1 + 2.0**-22,      # just above a tie -> rounds up
        fmt.max_finite,
        fmt.max_finite + ulp_at_max / 2,   # tie at the top: ieee formats -> inf; e4m3fn -> 448
        fmt.max_finite + ulp_at_max * 0.6, # overflow
        1e30, 3.0e38, math.inf, math.nan,
    ]
    x = torch.tensor(values, dtype=torch.float32)
    return torch.cat([x, -x])


@pytest.mark.points(3)
@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=FORMAT_IDS)
def test_special_values_match_torch_cast(fmt, torch_ref, no_casts):
    x = special_values(fmt)
    ours = no_casts("to_bits", x, fmt)
    assert ours.dtype == torch.int32 and ours.shape == x.shape
    ref = torch_ref.to_bits(x, fmt)
    ok = torch_ref.same_bits_or_both_nan(ours, ref, fmt)  # exact bits; any NaN pattern for NaN
    bad = [(float(v), hex(o), hex(r)) for v, o, r in zip(x[~ok], ours[~ok].tolist(), ref[~ok].tolist())]
    assert ok.all(), f"(x, ours, torch) mismatches: {bad}"


@pytest.mark.points(2)
def test_e4m3_saturates_overflow_and_infinity_to_448():
    # e4m3fn has no infinity; the saturating conversion clamps anything past 448 (0x7E) to 448.
    x = torch.tensor([448.0, 449.0, 464.0, 465.0, 1e6, math.inf, -500.0, -math.inf, 416.0])
    expected = [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0xFE, 0x7D]  # 0xFE = -448, 0x7D = 416
    assert to_bits(x, FP8_E4M3).tolist() == expected


@pytest.mark.points(2)
def test_e5m2_overflows_to_infinity():
    # e5m2 keeps IEEE infinities: max 57344 (0x7B), tie 61440 rounds to even = inf (0x7C)
    x = torch.tensor([57344.0, 61439.0, 61440.0, -1e6, math.inf])
    assert to_bits(x, FP8_E5M2).tolist() == [0x7B, 0x7B, 0x7C, 0xFC, 0x7C]


def spread_float32(fmt, n: int, gen: torch.Generator) -> torch.Tensor:
    """n float32 values with random sign and mantissa, exponents spanning the format's subnormal
    range up to a little past its largest finite value."""
    lo = max(127 - fmt.bias - fmt.man_bits - 3, 0)
    hi = min(127 + math.floor(math.log2(fmt.max_finite)) + 2, 254)
    exponent = torch.randint(lo, hi + 1, (n,), generator=gen, dtype=torch.int32)
    mantissa = torch.randint(0, 1 << 23, (n,), generator=gen, dtype=torch.int32)
    sign = torch.randint(0, 2, (n,), generator=gen, dtype=torch.int32)
    return ((sign << 31) | (exponent << 23) | mantissa).view(torch.float32)


@pytest.mark.points(3)
@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=FORMAT_IDS)
def test_random_values_across_the_range_match_torch_cast(fmt, torch_ref, no_casts):
    gen = torch.Generator().manual_seed(1234)
    x = spread_float32(fmt, 1_000_000, gen)
    ours = no_casts("to_bits", x, fmt)
    mismatched = int((ours != torch_ref.to_bits(x, fmt)).sum())  # no NaN inputs here: exact
    assert mismatched == 0, f"{mismatched} of {x.numel()} values round differently from torch"


@pytest.mark.points(2)
@pytest.mark.parametrize("fmt", [FP8_E4M3, FP8_E5M2], ids=["fp8_e4m3fn", "fp8_e5m2"])
def test_from_bits_decodes_every_fp8_pattern_like_torch(fmt, torch_ref, no_casts):
    bits = torch.arange(256, dtype=torch.int32)
    ours = no_casts("from_bits", bits, fmt)
    ref = torch_ref.from_bits(bits, fmt)
    assert ours.dtype == torch.float32
    # exact float32 patterns (so -0.0 must stay -0.0), or NaN on both sides
    ok = (ours.view(torch.int32) == ref.view(torch.int32)) | (ours.isnan() & ref.isnan())
    assert ok.all(), f"patterns decoded wrongly: {[hex(b) for b in bits[~ok].tolist()]}"
