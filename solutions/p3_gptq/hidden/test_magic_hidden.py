"""The magic-number trick on every case: all 16 nibble values at all 8 positions of a word, every zero
point 0..16 on both the subtract (even nibble) and the fma (odd nibble, 16 q) paths, int32 and
uint32 forms of a word, and scaled values down to fp16 subnormals. Oracle: shifts, masks and integer
arithmetic; torch reads the fp16 bit patterns."""

import pytest
import torch
from gptq import dequant_word, dequant_word_scaled, magic_registers

pytestmark = pytest.mark.kernels()  # plain Python, no Triton kernel


def as_fp16(bits: list[int]) -> torch.Tensor:
    return torch.tensor([b - 65536 if b >= 32768 else b for b in bits], dtype=torch.int16).view(torch.float16)

def context(case: str):
    """assert_close's msg: the case, then torch's report of the mismatch (values, positions)."""
    return lambda report: f"{case}:\n{report}"


def word_with(codes: list[int]) -> int:
    """The uint32 word of 8 codes, code t in bits 4t..4t+3."""
    return sum(q << (4 * t) for t, q in enumerate(codes))


def background(seed: int) -> list[int]:
    return torch.randint(0, 16, (8,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.points(2)
def test_every_nibble_value_at_every_position_dequantizes_exactly(tol):
    for pos in range(8):
        for value in range(16):
            codes = background(16 * pos + value)
            codes[pos] = value
            zero = 1 + (3 * pos + value) % 16  # every zero 1..16 comes up
            got = as_fp16(dequant_word(word_with(codes), zero))
            expected = torch.tensor([q - zero for q in codes], dtype=torch.float16)
            torch.testing.assert_close(got, expected, **tol("exact"), msg=context(
                f"nibble {value} at position {pos} (bits {4 * pos}..{4 * pos + 3}), zero {zero}, word "
                f"{word_with(codes):#010x}"))


@pytest.mark.points(2)
@pytest.mark.parametrize("path", ["subtract, even nibbles", "fma, odd nibbles"])
def test_every_zero_point_on_both_paths(tol, path):
    first = 0 if path.startswith("subtract") else 1
    for zero in range(17):
        for value in (0, 1, 7, 8, 15):
            codes = [5] * 8
            codes[first::2] = [value] * 4
            got = as_fp16(dequant_word(word_with(codes), zero))
            expected = torch.tensor([q - zero for q in codes], dtype=torch.float16)
            torch.testing.assert_close(got, expected, **tol("exact"),
                                       msg=context(f"{path}: code {value}, zero {zero}"))


def test_registers_hold_1024_plus_q_and_1024_plus_16q_for_random_words(tol):
    gen = torch.Generator().manual_seed(1)
    for word in torch.randint(0, 2**32, (64,), generator=gen, dtype=torch.int64).tolist():
        q = [(word >> (4 * t)) & 0xF for t in range(8)]
        # halves in register order: (q0, q4), (16 q1, 16 q5), (q2, q6), (16 q3, 16 q7), each OR-ed into 0x6400
        expected = [0x6400 | v for v in (q[0], q[4], 16 * q[1], 16 * q[5], q[2], q[6], 16 * q[3], 16 * q[7])]
        regs = magic_registers(word - 2**32 if word >= 2**31 else word)  # as the int32 a qweight tensor holds
        got = [r >> s & 0xFFFF for r in regs for s in (0, 16)]
        assert got == expected, f"word {word:#010x}: halves {[hex(b) for b in got]}, expected {[hex(b) for b in expected]}"
        torch.testing.assert_close(as_fp16(got), torch.tensor([1024 + (b & 0x3FF) for b in expected]).half(),
                                   **tol("exact"))


def test_int32_and_uint32_forms_of_a_word_agree():
    for word in (0xF0000000, 0x80000008, 0xFFFFFFFF, 0x8F8F8F8F):
        assert dequant_word(word, 8) == dequant_word(word - 2**32, 8), f"word {word:#010x}"
        assert magic_registers(word) == magic_registers(word - 2**32), f"word {word:#010x}"


@pytest.mark.parametrize("scale", [2.0**-20, 3.1e-4, 0.0123, 1.5, 100.0])
def test_scaled_values_round_once_to_fp16(tol, scale):
    s = torch.tensor(scale).half()
    bits = int(s.view(torch.int16)) & 0xFFFF
    gen = torch.Generator().manual_seed(2)
    for word in torch.randint(0, 2**32, (16,), generator=gen, dtype=torch.int64).tolist():
        for zero in (1, 8, 16):
            got = as_fp16(dequant_word_scaled(word, zero, bits))
            exact = torch.tensor([((word >> (4 * t)) & 0xF) - zero for t in range(8)], dtype=torch.float32) * s.float()
            torch.testing.assert_close(got, exact.half(), **tol("exact"),
                                       msg=context(f"word {word:#010x}, zero {zero}, scale {float(s)}"))
