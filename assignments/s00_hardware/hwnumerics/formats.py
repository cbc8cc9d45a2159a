"""Low-precision float formats, converted from float32 with integer operations on the bit patterns.

A format has 1 sign bit, `exp_bits` exponent bits (bias 2**(exp_bits-1) - 1) and `man_bits`
mantissa bits. Biased exponent 0 holds zero and the subnormals (no implicit leading 1, exponent
1 - bias). Bit patterns travel as int32 tensors holding the unsigned pattern, e.g. 0x3F80 for
bf16 1.0, or 0x38 for fp8 e4m3 1.0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class FloatFormat:
    """A binary float format.

    ieee_specials=True (bf16, fp16, fp8 e5m2): the all-ones exponent holds +-inf (mantissa 0) and
    NaN (mantissa != 0); a value that rounds past the largest finite becomes +-inf.
    ieee_specials=False (fp8 e4m3fn, "fn" = finite): only S.1111.111 is NaN, the all-ones exponent
    is otherwise finite, there is no infinity, and conversion SATURATES: any value that rounds past
    the largest finite, and +-inf, becomes +-max_finite.
    """

    name: str
    exp_bits: int
    man_bits: int
    ieee_specials: bool

    def __post_init__(self) -> None:
        # The encoder assumes the format sits inside float32: no more exponent or mantissa bits.
        if not 2 <= self.exp_bits <= 8:
            raise ValueError(f"{self.name}: exp_bits must be in [2, 8], got {self.exp_bits}")
        if not 1 <= self.man_bits <= 22:
            raise ValueError(f"{self.name}: man_bits must be in [1, 22], got {self.man_bits}")

    @property
    def width(self) -> int:
        """Total bits: 1 + exp_bits + man_bits."""
        return 1 + self.exp_bits + self.man_bits

    @property
    def bias(self) -> int:
        return 2 ** (self.exp_bits - 1) - 1

    @property
    def max_finite_bits(self) -> int:
        """Pattern (sign 0) of the largest finite value: 0x7BFF for fp16, 0x7E for e4m3fn."""
        all_ones_exp = (2**self.exp_bits - 1) << self.man_bits
        return all_ones_exp - 1 if self.ieee_specials else all_ones_exp + 2**self.man_bits - 2

    @property
    def inf_bits(self) -> int | None:
        """Pattern of +inf, or None for a format without infinities."""
        return (2**self.exp_bits - 1) << self.man_bits if self.ieee_specials else None

    @property
    def nan_bits(self) -> int:
        """Canonical quiet NaN (sign 0): all-ones exponent and top mantissa bit (e4m3fn: 0x7F)."""
        all_ones_exp = (2**self.exp_bits - 1) << self.man_bits
        if self.ieee_specials:
            return all_ones_exp | (1 << (self.man_bits - 1))
        return all_ones_exp | (2**self.man_bits - 1)

    @property
    def max_finite(self) -> float:
        """Largest finite value: 65504 for fp16, 448 for e4m3fn, 57344 for e5m2."""
        exp_field = self.max_finite_bits >> self.man_bits
        mantissa = self.max_finite_bits & (2**self.man_bits - 1)
        return (1 + mantissa / 2**self.man_bits) * 2.0 ** (exp_field - self.bias)

    @property
    def min_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive value, and the spacing of the subnormals: 2**(1 - bias - man_bits)."""
        return 2.0 ** (1 - self.bias - self.man_bits)

    @property
    def unit_roundoff(self) -> float:
        """Largest relative rounding error in the normal range: 2**-(man_bits + 1)."""
        return 2.0 ** -(self.man_bits + 1)


BF16 = FloatFormat("bf16", exp_bits=8, man_bits=7, ieee_specials=True)
FP16 = FloatFormat("fp16", exp_bits=5, man_bits=10, ieee_specials=True)
FP8_E4M3 = FloatFormat("fp8_e4m3fn", exp_bits=4, man_bits=3, ieee_specials=False)
FP8_E5M2 = FloatFormat("fp8_e5m2", exp_bits=5, man_bits=2, ieee_specials=True)


def _pow2(shift: Tensor) -> Tensor:
    """2**shift elementwise, for an int32 tensor of shifts in [0, 30]."""
    return torch.bitwise_left_shift(torch.ones_like(shift), shift)


def to_bits(x: Tensor, fmt: FloatFormat) -> Tensor:
    """Round float32 `x` to the nearest value of `fmt`, ties to even; return int32 bit patterns.

    Works on the float32 bit patterns (`x.view(torch.int32)`) with integer tensor ops only --
    no cast to a low-precision torch dtype, no numpy -- vectorised over any shape.
    Rules, with s the sign bit of x placed at bit fmt.width - 1:
      * finite x: round-to-nearest-even onto the format's grid, subnormals included;
        +-0 keep their sign, a result below half the smallest subnormal is +-0;
      * overflow (rounds past max_finite) and +-inf: +-inf if fmt.ieee_specials, else saturate
        to +-max_finite (e4m3fn);
      * NaN: a NaN of the format with the sign of x (the reference returns s | fmt.nan_bits;
        tests accept any NaN pattern).
    Returns an int32 tensor of x's shape with values in [0, 2**fmt.width).
    """
    if x.dtype != torch.float32:
        raise ValueError(f"to_bits expects float32 input, got {x.dtype}")
    raise NotImplementedError("s00.5: to_bits")


def from_bits(bits: Tensor, fmt: FloatFormat) -> Tensor:
    """Decode `fmt` bit patterns (an integer tensor with values in [0, 2**fmt.width)) to float32.

    Exact: every value of these formats is a float32. Subnormals decode as
    mantissa * 2**(1 - bias - man_bits); the format's infinities and NaNs decode to float32 inf and
    NaN with their sign. No cast through a low-precision torch dtype.
    """
    raise NotImplementedError("s00.6: from_bits")


def round_to_format(x: Tensor, fmt: FloatFormat) -> Tensor:
    """float32 `x` rounded to `fmt` and decoded back to float32 (a fake-quantize)."""
    return from_bits(to_bits(x, fmt), fmt)
