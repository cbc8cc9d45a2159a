"""The magic-number dequantization in plain Python: registers and values against integer arithmetic.

The oracle never uses the trick: codes come from the word by shifts and masks, q - z and
(q - z) * s by integer and fp32 arithmetic, and torch reads fp16 bit patterns (`.view(torch.float16)`).
"""

import pytest
import torch
from gptq import dequant_word, dequant_word_scaled, magic_registers

pytestmark = pytest.mark.kernels()  # plain Python, no Triton kernel
WORD = 0x87654321 - 2**32  # nibbles 1..8, least significant first; int32, so the sign bit is set


def as_fp16(bits: list[int]) -> torch.Tensor:
    """fp16 bit patterns (0..0xFFFF) -> the fp16 values they encode."""
    return torch.tensor([b - 65536 if b >= 32768 else b for b in bits], dtype=torch.int16).view(torch.float16)

def context(case: str):
    """assert_close's msg: the case, then torch's report of the mismatch (values, positions)."""
    return lambda report: f"{case}:\n{report}"


def codes_of(word: int) -> list[int]:
    return [(word >> (4 * t)) & 0xF for t in range(8)]


def test_magic_registers_of_a_word_worked_by_hand(tol):
    # 0x6400 is 1024.0 in fp16 and its mantissa counts in ones: OR-ing a nibble q in gives 1024 + q.
    torch.testing.assert_close(as_fp16([0x6400, 0x6405, 0x6460]), torch.tensor([1024.0, 1029.0, 1120.0]).half(),
                               **tol("exact"))
    regs = magic_registers(WORD)
    # lo: nibbles 0 (=1) and 4 (=5); hi: nibbles 1 (=2) and 5 (=6) at bits 4-7 of each half, i.e. 16 q;
    # then the same for the word shifted right by 8: nibbles 2, 6 (=3, 7) and 3, 7 (=4, 8).
    expected = (0x64056401, 0x64606420, 0x64076403, 0x64806440)
    assert tuple(regs) == expected, (
        f"magic_registers(0x87654321) = {[hex(r) for r in regs]}, expected {[hex(r) for r in expected]}")
    halves = [r >> s & 0xFFFF for r in regs for s in (0, 16)]
    torch.testing.assert_close(as_fp16(halves), torch.tensor([1025, 1029, 1056, 1120, 1027, 1031, 1088, 1152.0]).half(),
                               **tol("exact"))


@pytest.mark.parametrize("zero", [8, 1, 16])
def test_dequant_word_gives_each_code_minus_the_zero_in_nibble_order(tol, zero):
    # The symmetric zero 8 is Marlin's case: 0x6408 = 1032.0 and 0xd480 = -72.0 are its constants.
    torch.testing.assert_close(as_fp16([0x6408, 0xD480, 0x2C00]), torch.tensor([1032.0, -72.0, 1 / 16]).half(),
                               **tol("exact"))
    got = dequant_word(WORD, zero)
    expected = torch.tensor([q - zero for q in codes_of(WORD)], dtype=torch.float16)  # q_t = t + 1
    torch.testing.assert_close(as_fp16(got), expected, **tol("exact"),
                               msg=context(f"dequant_word(0x87654321, zero={zero}), nibble t at bits 4t..4t+3"))


def test_dequant_word_scaled_rounds_each_product_once_to_fp16(tol):
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        word = int(torch.randint(-(2**31), 2**31, (1,), generator=gen))
        zero = int(torch.randint(1, 17, (1,), generator=gen))
        scale = (torch.rand(1, generator=gen) * 0.02 + 0.001).half()
        scale_bits = int(scale.view(torch.int16)) & 0xFFFF
        got = as_fp16(dequant_word_scaled(word, zero, scale_bits))
        # (q - z) has 5 bits and s 11: their product is exact in fp32, so .half() rounds it once.
        expected = (torch.tensor([q - zero for q in codes_of(word)], dtype=torch.float32) * scale.float()).half()
        torch.testing.assert_close(got, expected, **tol("exact"),
                                   msg=context(f"word {word & 0xFFFFFFFF:#010x}, zero {zero}, scale {float(scale)}"))
