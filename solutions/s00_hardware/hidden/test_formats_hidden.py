"""Hidden: every tie of every format, millions of raw bit patterns, exhaustive decode and round trip."""

import pytest
import torch
from hwnumerics import BF16, FP8_E4M3, FP8_E5M2, FP16, round_to_format

ALL_FORMATS = [BF16, FP16, FP8_E4M3, FP8_E5M2]
FORMAT_IDS = [f.name for f in ALL_FORMATS]


def finite_positive_patterns(fmt) -> torch.Tensor:
    """0 .. max_finite_bits: every finite non-negative value of the format, in increasing order."""
    return torch.arange(fmt.max_finite_bits + 1, dtype=torch.int32)


@pytest.mark.points(3)
@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=FORMAT_IDS)
def test_every_midpoint_between_neighbours_rounds_to_even_like_torch(fmt, torch_ref, no_casts):
    values = torch_ref.from_bits(finite_positive_patterns(fmt), fmt).double()
    # The midpoint of two neighbours has man_bits + 2 significant bits: exact in float32.
    mid = ((values[:-1] + values[1:]) / 2).float()
    x = torch.cat([mid, -mid])
    ours = no_casts("to_bits", x, fmt)
    ref = torch_ref.to_bits(x, fmt)
    bad = (ours != ref).nonzero().flatten()[:5]
    assert bad.numel() == 0, f"ties: x={x[bad].tolist()} ours={ours[bad].tolist()} torch={ref[bad].tolist()}"


@pytest.mark.points(3)
@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=FORMAT_IDS)
def test_four_million_random_float32_bit_patterns_match_torch(fmt, torch_ref, no_casts):
    # Uniform over all 2**32 patterns: NaNs with payloads, infinities, float32 subnormals, overflow.
    gen = torch.Generator().manual_seed(20_26)
    x = torch.randint(-(2**31), 2**31, (4_000_000,), generator=gen, dtype=torch.int64).to(torch.int32)
    x = x.view(torch.float32)
    ours = no_casts("to_bits", x, fmt)
    assert ours.dtype == torch.int32
    ok = torch_ref.same_bits_or_both_nan(ours, torch_ref.to_bits(x, fmt), fmt)
    assert int((~ok).sum()) == 0, f"{int((~ok).sum())} mismatches, first x: {x[~ok][:5].tolist()}"


@pytest.mark.points(2)
@pytest.mark.parametrize("fmt", [BF16, FP16], ids=["bf16", "fp16"])
def test_from_bits_decodes_every_16bit_pattern_like_torch(fmt, torch_ref, no_casts):
    bits = torch.arange(1 << 16, dtype=torch.int32)
    ours = no_casts("from_bits", bits, fmt)
    ref = torch_ref.from_bits(bits, fmt)
    ok = (ours.view(torch.int32) == ref.view(torch.int32)) | (ours.isnan() & ref.isnan())
    assert ok.all(), f"patterns decoded wrongly: {[hex(b) for b in bits[~ok][:8].tolist()]}"


@pytest.mark.points(2)
@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=FORMAT_IDS)
def test_every_finite_value_survives_a_round_trip(fmt, no_casts):
    pos = finite_positive_patterns(fmt)
    bits = torch.cat([pos, pos | (1 << (fmt.width - 1))])  # both signs, -0 included
    back = no_casts("to_bits", no_casts("from_bits", bits, fmt), fmt)
    assert torch.equal(back, bits)


@pytest.mark.points(2)
@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=FORMAT_IDS)
def test_float32_subnormal_inputs_match_torch(fmt, torch_ref, no_casts):
    # float32 subnormals: bf16 keeps them (same exponent range); the others round to +-0.
    gen = torch.Generator().manual_seed(7)
    mantissa = torch.randint(1, 1 << 23, (100_000,), generator=gen, dtype=torch.int32)
    x = torch.cat([mantissa, mantissa | (1 << 31)]).view(torch.float32)
    ours = no_casts("to_bits", x, fmt)
    assert torch.equal(ours, torch_ref.to_bits(x, fmt))


@pytest.mark.points(1)
def test_round_to_format_keeps_shape_and_sign_of_zero():
    x = torch.tensor([[-0.0, 0.0], [1.0 + 2.0**-9, -3.0e-8]])
    y = round_to_format(x, FP16)
    assert y.shape == (2, 2) and y.dtype == torch.float32
    assert torch.equal(torch.signbit(y), torch.tensor([[True, False], [False, True]]))
    assert y[1, 0].item() == 1.0 + 2.0**-9  # exactly representable in fp16 (10 mantissa bits)
    assert y[1, 1].item() == -5.960464477539063e-08  # -3e-8 rounds up to -2**-24, the smallest subnormal
