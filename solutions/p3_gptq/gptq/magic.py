"""Magic-number dequantization, modelled bit for bit in plain Python before the kernel does it in PTX.

An fp16 number is 1 sign bit, 5 exponent bits (bias 15) and 10 mantissa bits. The pattern 0x6400
has exponent 25 - 15 = 10, so it is 1024.0 and its mantissa counts in steps of exactly 1:
0x6400 | q is the fp16 number 1024 + q for any q in 0..1023. Marlin's `dequant` (after NVIDIA
FasterTransformer's `interleaved_numeric_conversion.h`) turns one int32 word of eight 4-bit codes
into eight fp16 values with no int -> float conversion:

    lo = (word & 0x000f000f) | 0x64006400      nibbles 0 and 4: halves 1024 + q
    hi = (word & 0x00f000f0) | 0x64006400      nibbles 1 and 5: halves 1024 + 16 q
    the same for word >> 8                      nibbles 2, 6 and 3, 7
    lo - (1024 + z)          = q - z           one fp16 subtract, exact
    hi * (1/16) - (64 + z)   = q - z           one fp16 fma (0x2c00 is 1/16), exact

Every 32-bit register here holds two fp16 values (a `half2`): the low 16 bits are the first, the
high 16 bits the second. Values are Python ints (bit patterns) and floats; `half`, `half_bits`,
`hsub2`, `hfma2` and `hmul2` are given: they model CUDA's half2 intrinsics, each result rounded once
to fp16 (exact for every input this module produces).
"""

from __future__ import annotations

import struct

MAGIC = 0x6400  # fp16 1024.0: exponent 10, one mantissa step = 1
ONE_SIXTEENTH = 0x2C00  # fp16 1/16: exponent 11 - 15 = -4, mantissa 0
LO_MASK = 0x000F000F  # bits 0-3 of each 16-bit half: nibbles 0 and 4 of a word
HI_MASK = 0x00F000F0  # bits 4-7 of each half: nibbles 1 and 5
WORD = 0xFFFFFFFF


def half(bits: int) -> float:
    """The value of the fp16 bit pattern `bits` (0..0xFFFF)."""
    return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]


def half_bits(x: float) -> int:
    """The fp16 bit pattern of x rounded to the nearest fp16 (ties to even); OverflowError past 65504."""
    return struct.unpack("<H", struct.pack("<e", x))[0]


def pair(lo: int, hi: int | None = None) -> int:
    """A 32-bit register holding the fp16 patterns lo (bits 0-15) and hi (bits 16-31; default: lo)."""
    return (lo & 0xFFFF) | ((lo if hi is None else hi) & 0xFFFF) << 16


def halves(reg: int) -> tuple[int, int]:
    """The two fp16 patterns of a 32-bit register: (bits 0-15, bits 16-31)."""
    return reg & 0xFFFF, (reg >> 16) & 0xFFFF


def hsub2(a: int, b: int) -> int:
    """__hsub2: a - b on both halves of two registers."""
    return pair(*(half_bits(half(x) - half(y)) for x, y in zip(halves(a), halves(b))))


def hfma2(a: int, b: int, c: int) -> int:
    """__hfma2: a * b + c on both halves, rounded once (float64 holds a * b + c exactly here)."""
    return pair(*(half_bits(half(x) * half(y) + half(z)) for x, y, z in zip(halves(a), halves(b), halves(c))))


def hmul2(a: int, b: int) -> int:
    """__hmul2: a * b on both halves, rounded once."""
    return pair(*(half_bits(half(x) * half(y)) for x, y in zip(halves(a), halves(b))))


def _check(word: int, zero: int) -> None:
    if not -(2**31) <= word < 2**32:
        raise ValueError(f"word must be an int32 or uint32 value, got {word}")
    if not 0 <= zero <= 16:
        raise ValueError(f"zero must lie in [0, 16] (a 4-bit grid's zero point), got {zero}")


def magic_registers(word: int) -> tuple[int, int, int, int]:
    """The four half2 registers Marlin's two lop3s per shift build from one word (int32, the sign bit
    may be set, or uint32): (lo, hi) of the word, then (lo, hi) of the word shifted right by 8.

        lo = (w & LO_MASK) | MAGIC << 16 | MAGIC      halves 1024 + nibble 0 / 4  (then 2 / 6)
        hi = (w & HI_MASK) | MAGIC << 16 | MAGIC      halves 1024 + 16 nibble 1 / 5  (then 3 / 7)
    Each is a uint32 in 0..2^32 - 1."""
    _check(word, 0)
    # BEGIN SOLUTION
    w = word & WORD  # as uint32: a logical shift below
    magic = pair(MAGIC)
    return ((w & LO_MASK) | magic, (w & HI_MASK) | magic,
            ((w >> 8) & LO_MASK) | magic, ((w >> 8) & HI_MASK) | magic)
    # END SOLUTION


def dequant_word(word: int, zero: int) -> list[int]:
    """The eight fp16 patterns of q_t - zero, t = 0..7 with q_t the nibble in bits 4t..4t+3 (least
    significant first, the v1 layout), from magic_registers by one hsub2 on each lo register (subtract
    1024 + zero) and one hfma2 on each hi register (times 1/16, minus 64 + zero). zero: 0..16."""
    _check(word, zero)
    # BEGIN SOLUTION
    lo0, hi0, lo8, hi8 = magic_registers(word)
    sub = pair(MAGIC + zero)  # 1024 + zero: the mantissa step is 1, so zero adds to the bits
    add = pair(half_bits(-(64.0 + zero)))  # -(64 + zero): 0xd480 for Marlin's symmetric zero 8
    mul = pair(ONE_SIXTEENTH)
    out = [0] * 8
    for reg, (first, second) in ((hsub2(lo0, sub), (0, 4)), (hfma2(hi0, mul, add), (1, 5)),
                                 (hsub2(lo8, sub), (2, 6)), (hfma2(hi8, mul, add), (3, 7))):
        out[first], out[second] = halves(reg)
    return out
    # END SOLUTION


def dequant_word_scaled(word: int, zero: int, scale: int) -> list[int]:
    """The eight fp16 patterns of scale * (q_t - zero), scale an fp16 bit pattern: dequant_word's
    values multiplied by the scale with hmul2 (one fp16 rounding each, as the kernel's fp16 path)."""
    _check(word, zero)
    # BEGIN SOLUTION
    q = dequant_word(word, zero)
    s = pair(scale)
    return [v for t in (0, 2, 4, 6) for v in halves(hmul2(pair(q[t], q[t + 1]), s))]
    # END SOLUTION
