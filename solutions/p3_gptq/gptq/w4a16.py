"""W4A16 GEMM for GPTQ-packed 4-bit weights (the v1 layout of pack.py, as AutoGPTQ and vLLM read it).

    C (M, N) = A (M, K) @ W^T,   W (N out, K in) dequantized inside the GEMM, fp32 accumulation.

Layout (see pack.py):
    qweight int32 (K/8, N)  eight 4-bit codes of input rows 8j..8j+7; row 8j+t in bits 4t..4t+3
    qzeros  int32 (G, N/8)  (zero - 1) packed along N the same way; column 8c+t in bits 4t..4t+3
    scales  fp16  (G, N)
    g_idx   int32 (K,)      group of input channel k (not contiguous under act-order)
    W[n, k] = scales[g, n] * (code[k, n] - (zero_stored[g, n] + 1)),  g = g_idx[k]

Kernels:
    _w4a16_kernel      program (tile_m, tile_n) x split s: loads an A tile and the packed qweight
                       tile, unpacks / subtracts zeros / scales in registers, tl.dot into fp32. Fast path
                       (one group per K tile, BLOCK_K >= 128): nibble planes, see _planes.
                       SPLIT_K = 1 stores C in A's dtype; SPLIT_K > 1 stores fp32 partial sums to a
                       workspace (SPLIT_K, M, N).
    _w4a16_swapped_kernel  M > 16 with sequential groups a multiple of BLOCK_K: the transposed product
                       C^T (N, M) = W (N, K) @ A^T (K, M), the dequantized W tile in registers as the
                       MMA's first operand, its scale folded in, every dot on one accumulator.
    _splitk_reduce_kernel  sums the workspace over s = 0..SPLIT_K-1 in that fixed order and casts.
No atomics anywhere: the result is bitwise reproducible run to run (for a fixed configuration).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch import Tensor

H200_NUM_SMS = 132  # used to pick split_k when no CUDA device is visible (e.g. CPU interpreter)
MAX_SPLIT_K = 16
SMEM_PER_SM = 233_472  # bytes of shared memory per SM on Hopper (228 KiB)


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------


@triton.jit
def _round_bf16(x):
    """fp32 -> fp32 rounded to bf16 precision, round-to-nearest-even (finite x).

    Used only under the CPU interpreter, whose tl.dot mishandles bf16 operands (it multiplies the
    raw uint16 bit patterns) and whose fp32 -> bf16 cast truncates. bf16 x bf16 products are exact
    in fp32, so tl.dot on these fp32 copies reproduces what the GPU's bf16 tensor cores compute.
    """
    bits = x.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536  # -65536 == 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


def _planes_asm(magic: int) -> str:
    """PTX for _planes: words $8, $9 -> 8 registers of two 16-bit floats (magic | nibble t of each)."""
    # BEGIN SOLUTION
    out = ["{", ".reg .b32 lo, hi, t;", "prmt.b32 lo, $8, $9, 0x5410;", "prmt.b32 hi, $8, $9, 0x7632;"]
    for t in range(8):  # low halves of both words hold nibbles 0-3, high halves 4-7; lop3 0xea: (x & y) | z
        x = "t" if t % 4 else ("lo" if t < 4 else "hi")
        out += [f"shr.b32 t, {'lo' if t < 4 else 'hi'}, {4 * (t % 4)};"] * (t % 4 > 0)
        out += [f"lop3.b32 ${t}, {x}, 0x000f000f, {magic:#x}, 0xea;"]
    return "\n".join(out + ["}"])
    # END SOLUTION


@triton.jit
def _planes(words, DT: tl.constexpr, MAGIC: tl.constexpr, PTX: tl.constexpr):
    """The 8 nibble planes of int32 words (R, C): plane t = MAGIC + ((words >> 4t) & 0xF) in DT, exact. On the
    GPU one PTX block (PTX = _planes_asm's) per two words makes their 16-bit pairs with 1-2 integer
    instructions each, no int -> float conversion (MAGIC + code is MAGIC's bits with the code in the low 4)."""
    # BEGIN SOLUTION
    if PTX == "":
        return ((((words >> 0) & 0xF) + MAGIC).to(DT), (((words >> 4) & 0xF) + MAGIC).to(DT),
                (((words >> 8) & 0xF) + MAGIC).to(DT), (((words >> 12) & 0xF) + MAGIC).to(DT),
                (((words >> 16) & 0xF) + MAGIC).to(DT), (((words >> 20) & 0xF) + MAGIC).to(DT),
                (((words >> 24) & 0xF) + MAGIC).to(DT), (((words >> 28) & 0xF) + MAGIC).to(DT))
    return tl.inline_asm_elementwise(PTX, "=r,=r,=r,=r,=r,=r,=r,=r,r,r", [words], dtype=(DT.value,) * 8,
                                     is_pure=True, pack=2)
    # END SOLUTION


@triton.jit
def _split8(a, BLOCK_M: tl.constexpr, BKW: tl.constexpr):
    """A tile (BLOCK_M, 8 * BKW) -> its 8 column planes (BLOCK_M, BKW): plane t holds columns 8j + t."""
    # BEGIN SOLUTION
    x0, x1 = tl.split(tl.reshape(a, (BLOCK_M, BKW, 2, 2, 2)))  # bit 0 of t
    x00, x01 = tl.split(x0)  # bit 1
    x10, x11 = tl.split(x1)
    p0, p4 = tl.split(x00)  # bit 2
    p2, p6 = tl.split(x01)
    p1, p5 = tl.split(x10)
    p3, p7 = tl.split(x11)
    return p0, p1, p2, p3, p4, p5, p6, p7
    # END SOLUTION


@triton.jit
def _join8(p0, p1, p2, p3, p4, p5, p6, p7, R: tl.constexpr, C: tl.constexpr):
    """8 planes (R, C) -> one tile (R, 8 * C) whose column 8j + t is plane t's column j (_split8 undone)."""
    # BEGIN SOLUTION
    even = tl.join(tl.join(p0, p4), tl.join(p2, p6))  # (R, C, 2, 2): [.., bit 2, bit 1] of t
    odd = tl.join(tl.join(p1, p5), tl.join(p3, p7))
    return tl.reshape(tl.join(even, odd), (R, 8 * C))  # last axis bit 0: t = 4 b2 + 2 b1 + b0
    # END SOLUTION


@triton.jit
def _w4a16_kernel(
    A, QW, QZ, SC, GIDX, C,
    M, N, K, K_PER_SPLIT,  # K_PER_SPLIT: input channels per split, a multiple of BLOCK_K
    stride_am, stride_ak,  # A (M, K), any strides
    stride_qk, stride_qn,  # qweight (K/8, N)
    stride_zg, stride_zn,  # qzeros (G, N/8)
    stride_sg, stride_sn,  # scales (G, N)
    stride_cs, stride_cm, stride_cn,  # C: (M, N) output, or (SPLIT_K, M, N) fp32 workspace
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,  # tile_m swizzle width for L2 reuse
    GROUP_SIZE: tl.constexpr,  # > 0: g_idx[k] == k // GROUP_SIZE (sequential groups, fast path); 0: read g_idx
    SCALE_AFTER_DOT: tl.constexpr,  # GROUP_SIZE % BLOCK_K == 0: one group per K tile
    EMULATE_BF16: tl.constexpr,  # interpreter only, see _round_bf16; always False on the GPU
    PLANES: tl.constexpr = False,  # SCALE_AFTER_DOT and BLOCK_K >= 128: 8 dots of nibble planes, see below
    PTX: tl.constexpr = "",  # PLANES on the GPU: _planes_asm's text ("" under the interpreter)
):
    # BEGIN SOLUTION
    pid = tl.program_id(0)
    split = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # Grouped ordering: GROUP_M consecutive tile rows share the same weight columns in L2.
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_rows = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_rows
    pid_n = (pid % num_pid_in_group) // group_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = offs_m < M
    n_mask = offs_n < N
    offs_m64 = offs_m.to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    # Zero points are packed along N: column n sits in word n // 8, bits 4 * (n % 8).
    z_shift = (offs_n % 8) * 4

    k_begin = split * K_PER_SPLIT
    k_end = tl.minimum(k_begin + K_PER_SPLIT, K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    DT: tl.constexpr = tl.float32 if EMULATE_BF16 else A.dtype.element_ty
    MAGIC: tl.constexpr = 128 if A.dtype.element_ty == tl.bfloat16 else 1024  # 0x4300 in bf16, 0x6400 in fp16
    for k0 in range(k_begin, k_end, BLOCK_K):
        offs_k = k0 + rk
        k_mask = offs_k < K
        a = tl.load(A + offs_m64[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=m_mask[:, None] & k_mask[None, :], other=0.0)  # (BLOCK_M, BLOCK_K)
        offs_kw = k0 // 8 + tl.arange(0, BLOCK_K // 8)
        kw_mask = offs_kw < K // 8
        words = tl.load(QW + offs_kw[:, None] * stride_qk + offs_n[None, :] * stride_qn,
                        mask=kw_mask[:, None] & n_mask[None, :], other=0)  # (BLOCK_K/8, BLOCK_N)
        if SCALE_AFTER_DOT:
            # The whole K tile lies in group k0 // GROUP_SIZE: per-column zero and scale, and the
            # scale is applied to the fp32 dot product.
            g = k0 // GROUP_SIZE
            zw = tl.load(QZ + g * stride_zg + (offs_n // 8) * stride_zn, mask=n_mask, other=0)
            zero = ((zw >> z_shift) & 0xF) + 1  # (BLOCK_N,)
            scale = tl.load(SC + g * stride_sg + offs_n * stride_sn, mask=n_mask, other=0.0)

        if PLANES:
            # Nibble plane t of the words is the (BLOCK_K/8, BLOCK_N) tile of input rows 8j + t: 8 dots of
            # depth BLOCK_K/8 against A's columns 8j + t, with no reshape of W (whose layout conversion
            # through shared memory was the cost). The planes hold MAGIC + code (exact); the dots'
            # surplus sum_k a[m, k] * (MAGIC + zero[n]) is taken off once per tile.
            q = _planes(words, DT, MAGIC, PTX)
            p = _split8(a.to(DT), BLOCK_M, BLOCK_K // 8)
            rows = tl.sum(a.to(tl.float32), axis=1)  # (BLOCK_M,)
            cols = (zero + MAGIC).to(tl.float32)  # (BLOCK_N,)
            part = tl.dot(p[0], q[0])
            for t in tl.static_range(1, 8):
                part = tl.dot(p[t], q[t], part)
            acc += (part - rows[:, None] * cols[None, :]) * scale.to(tl.float32)[None, :]
        else:
            # ---- 4-bit codes of the (BLOCK_K, BLOCK_N) weight tile, as int32 in [0, 16) ----
            # Each packed word is read once; the 8 nibbles are expanded in registers:
            # (BLOCK_K/8, 8, BLOCK_N) -> (BLOCK_K, BLOCK_N), row 8j + t = word j >> 4t.
            nib = tl.arange(0, 8) * 4
            codes = (words[:, None, :] >> nib[None, :, None]) & 0xF
            codes = tl.reshape(codes, (BLOCK_K, BLOCK_N))

            if SCALE_AFTER_DOT:
                wi = codes - zero[None, :]  # integers in [-16, 14]: exact in fp16 / bf16
                if EMULATE_BF16:
                    part = tl.dot(a.to(tl.float32), wi.to(tl.float32))
                else:
                    part = tl.dot(a, wi.to(a.dtype))
                acc += part * scale.to(tl.float32)[None, :]
            else:
                # General path: the group of every k row (g_idx gather, or k // GROUP_SIZE).
                if GROUP_SIZE > 0:
                    g = offs_k // GROUP_SIZE
                else:
                    g = tl.load(GIDX + offs_k, mask=k_mask, other=0)
                gn_mask = k_mask[:, None] & n_mask[None, :]
                zw = tl.load(QZ + g[:, None] * stride_zg + (offs_n // 8)[None, :] * stride_zn,
                             mask=gn_mask, other=0)
                zero = ((zw >> z_shift[None, :]) & 0xF) + 1  # (BLOCK_K, BLOCK_N)
                scale = tl.load(SC + g[:, None] * stride_sg + offs_n[None, :] * stride_sn,
                                mask=gn_mask, other=0.0)
                w = (codes - zero).to(tl.float32) * scale.to(tl.float32)
                if EMULATE_BF16:
                    acc += tl.dot(a.to(tl.float32), _round_bf16(w))
                else:
                    acc += tl.dot(a, w.to(a.dtype))

    if EMULATE_BF16:  # noqa: SIM102 (constexpr branches, kept apart for Triton)
        if C.dtype.element_ty == tl.bfloat16:
            acc = _round_bf16(acc)
    c_ptrs = C + split.to(tl.int64) * stride_cs + offs_m64[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])
    # END SOLUTION


@triton.jit
def _w4a16_swapped_kernel(
    A, QW, QZ, SC, C,
    M, N, K, K_PER_SPLIT,  # K_PER_SPLIT: input channels per split, a multiple of BLOCK_K
    stride_am, stride_ak, stride_qk, stride_qn, stride_zg, stride_zn, stride_sg, stride_sn,
    stride_cs, stride_cm, stride_cn,  # C: (M, N) output, or (SPLIT_K, M, N) fp32 workspace
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE: tl.constexpr,  # g_idx[k] == k // GROUP_SIZE, GROUP_SIZE a multiple of BLOCK_K
    EMULATE_BF16: tl.constexpr,  # interpreter only, see _round_bf16
    PTX: tl.constexpr,  # _planes_asm's text on the GPU, "" under the interpreter
):
    """Program (tile_n, tile_m, split): the (BLOCK_N, BLOCK_M) tile of C^T = W @ A^T over its K range.

    Why transposed: Hopper's MMA (wgmma) takes its first operand from registers and only its second from
    shared memory, so a W tile dequantized in registers feeds it as the first operand directly; as the
    second it would be written to shared memory every K step first. Why the scale is folded into W (one
    fma per weight, exact in fp32 before the single rounding to A's dtype): a dot whose fp32 result is
    rescaled must finish before the next starts, while dots accumulating into one tile overlap the next
    tile's unpack. Both together took M = 128 from 0.41x to about 0.8x of bf16 on an H200."""
    # BEGIN SOLUTION
    pid_n, pid_m, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask, n_mask = offs_m < M, offs_n < N
    offs_m64 = offs_m.to(tl.int64)
    z_shift = (offs_n % 8) * 4
    DT: tl.constexpr = tl.float32 if EMULATE_BF16 else A.dtype.element_ty
    MAGIC: tl.constexpr = 128 if A.dtype.element_ty == tl.bfloat16 else 1024
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    k_begin = split * K_PER_SPLIT
    for k0 in range(k_begin, tl.minimum(k_begin + K_PER_SPLIT, K), BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        at = tl.load(A + offs_k[:, None] * stride_ak + offs_m64[None, :] * stride_am,
                     mask=(offs_k < K)[:, None] & m_mask[None, :], other=0.0)  # (BLOCK_K, BLOCK_M)
        offs_kw = k0 // 8 + tl.arange(0, BLOCK_K // 8)
        words = tl.load(QW + offs_kw[:, None] * stride_qk + offs_n[None, :] * stride_qn,
                        mask=(offs_kw < K // 8)[:, None] & n_mask[None, :], other=0)  # (BLOCK_K/8, BLOCK_N)
        g = k0 // GROUP_SIZE
        zw = tl.load(QZ + g * stride_zg + (offs_n // 8) * stride_zn, mask=n_mask, other=0)
        scale = tl.load(SC + g * stride_sg + offs_n * stride_sn, mask=n_mask, other=0.0).to(tl.float32)
        # W = (MAGIC + code) * s - (MAGIC + zero) * s: both products are exact in fp32, so is their
        # difference, and the fma rounds once, to the value a dequantize-then-round would give.
        bias = -(((zw >> z_shift) & 0xF) + 1 + MAGIC).to(tl.float32) * scale  # (BLOCK_N,)
        q = _planes(tl.trans(words), DT, MAGIC, PTX)  # 8 x (BLOCK_N, BLOCK_K/8)
        q = _join8(q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], BLOCK_N, BLOCK_K // 8)  # (BLOCK_N, BLOCK_K)
        w = tl.fma(q.to(tl.float32), scale[:, None], bias[:, None])
        if EMULATE_BF16:
            acc = tl.dot(_round_bf16(w), at.to(tl.float32), acc)
        else:
            acc = tl.dot(w.to(DT), at, acc)
    if EMULATE_BF16:  # noqa: SIM102 (constexpr branches, kept apart for Triton)
        if C.dtype.element_ty == tl.bfloat16:
            acc = _round_bf16(acc)
    c_ptrs = C + split.to(tl.int64) * stride_cs + offs_m64[None, :] * stride_cm + offs_n[:, None] * stride_cn
    tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=m_mask[None, :] & n_mask[:, None])
    # END SOLUTION


@triton.jit
def _splitk_reduce_kernel(
    WS, Out, MN,  # WS: contiguous fp32 (SPLIT_K, M, N); Out: contiguous (M, N); MN = M * N
    SPLIT_K: tl.constexpr, BLOCK: tl.constexpr,
    EMULATE_BF16: tl.constexpr,  # interpreter only, see _round_bf16
):
    """Out = sum over s = 0, 1, ..., SPLIT_K-1 of WS[s] in that order (fp32), cast to Out's dtype."""
    # BEGIN SOLUTION
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(WS + s * MN + offs, mask=mask, other=0.0)
    if EMULATE_BF16:
        acc = _round_bf16(acc)
    tl.store(Out + offs, acc.to(Out.dtype.element_ty), mask=mask)
    # END SOLUTION


# ---------------------------------------------------------------------------------------------
# Launcher
# ---------------------------------------------------------------------------------------------


def _is_pow2(x: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0 and x & (x - 1) == 0


def default_config(m: int, group_size: int = 0) -> dict:
    """Tile sizes and launch parameters by M and the group layout ("planes": False keeps a BLOCK_K >= 128
    tile of _w4a16_kernel on the reshape unpack; "swapped": True launches _w4a16_swapped_kernel).

    Sequential groups whose size is a multiple of 128 (the g128 checkpoints): the best of sweeps on an
    H200 (Llama-3-8B shapes, bf16, CUDA graph replays timed as the GPU test does). M <= 16 (2026-12-03):
    nibble planes at BLOCK_N 256, 1.39x bf16 geomean at M in {1, 4, 16}; BLOCK_N 128: 1.27x, 64: 0.99x,
    512: 1.25-1.31x; 2 or 4 stages, 8 warps, the transposed kernel: slower. M > 16 (2026-12-04): the
    transposed kernel, split as choose_split_k says; at M = 128, BLOCK_M x BLOCK_N 128 x 64 with 4 warps
    0.82x geomean, 128 x 128 with 8 warps 0.75x, 64 x 64 0.66x; _w4a16_kernel at its best 0.41x (a
    dequantized tile stored to shared memory for the MMA, a rescale after every dot). M > 128: 0.6x.
    Any other layout dequantizes per row of the K tile, whose zero and scale tiles do not fit the H200's
    shared memory at 16 x 128 x 128 with 3 stages (286,720 bytes of 232,448): it keeps general tiles."""
    tuned = group_size > 0 and group_size % 128 == 0
    if m <= 16:  # decode: a GEMV in disguise, bound by streaming qweight
        if tuned:
            return {"block_m": 16, "block_n": 256, "block_k": 128, "num_warps": 4, "num_stages": 3}
        return {"block_m": 16, "block_n": 64, "block_k": 128, "num_warps": 4, "num_stages": 4}
    if tuned:  # the transposed kernel; BLOCK_M is the MMA's N, so M = 17 ... 32 takes a 32-row tile
        bm = 32 if m <= 32 else 64 if m <= 64 else 128
        bn, warps = (64, 4) if m <= 128 else (128, 8)
        return {"block_m": bm, "block_n": bn, "block_k": 128, "num_warps": warps, "num_stages": 3, "swapped": True}
    if m <= 32:
        return {"block_m": 32, "block_n": 64, "block_k": 128, "num_warps": 4, "num_stages": 4}
    if m <= 64:
        return {"block_m": 64, "block_n": 64, "block_k": 64, "num_warps": 4, "num_stages": 4}
    return {"block_m": 128, "block_n": 128, "block_k": 64, "num_warps": 8, "num_stages": 3}


def _interpreting() -> bool:
    """True under TRITON_INTERPRET=1 (the CPU interpreter)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() not in ("", "0", "false", "off")


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return H200_NUM_SMS


def programs_per_sm(block_m: int, block_n: int, block_k: int, num_stages: int) -> int:
    """Programs of a launch an SM holds at once, by shared memory: num_stages buffers of an A tile
    (BLOCK_M x BLOCK_K, 16-bit) and a packed weight tile (BLOCK_K/8 x BLOCK_N words) each, at least 1."""
    per_program = num_stages * (block_m * block_k * 2 + block_k // 8 * block_n * 4)
    return max(1, SMEM_PER_SM // per_program)


def choose_split_k(m: int, n: int, k: int, block_m: int, block_n: int, block_k: int, num_sms: int,
                   per_sm: int = 2) -> int:
    """Splits of K so that a launch fills the GPU in one round: every program resident at once.

    num_sms * per_sm programs run at once (per_sm: programs_per_sm of the tiles); the output has
    cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) tiles, so (num_sms * per_sm) // tiles splits, but at least 1,
    each split keeping at least 4 K tiles (for the software pipeline), and at most MAX_SPLIT_K. A split
    more than fits starts a second round that runs nearly empty (on an H200 at M = 128: 3 splits of
    96 tiles, 288 programs where 264 fit, ran 0.59x of bf16 where 2 splits ran 0.71x)."""
    # BEGIN SOLUTION
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    return max(1, min(num_sms * per_sm // tiles, triton.cdiv(k, block_k) // 4, MAX_SPLIT_K))
    # END SOLUTION


def _check_inputs(a: Tensor, qweight: Tensor, qzeros: Tensor, scales: Tensor, g_idx: Tensor) -> None:
    """Shapes, dtypes, layouts and devices of w4a16_matmul's tensors; ValueError naming the problem."""
    # BEGIN SOLUTION
    for name, t in (("a", a), ("qweight", qweight), ("qzeros", qzeros), ("scales", scales), ("g_idx", g_idx)):
        if not isinstance(t, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")  # noqa: TRY004 (one error type)
    if a.dim() != 2 or a.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"a must be 2-D (M, K) float16 or bfloat16, got {a.dtype} {tuple(a.shape)}")
    k = a.shape[1]
    if k == 0 or k % 8:
        raise ValueError(f"K (a.shape[1]) must be a positive multiple of 8, got {k}")
    if qweight.dtype != torch.int32 or qweight.dim() != 2 or qweight.shape[0] != k // 8:
        raise ValueError(f"qweight must be int32 (K/8, N) with K/8 = {k // 8}, got {qweight.dtype} {tuple(qweight.shape)}")
    n = qweight.shape[1]
    if n == 0 or n % 8:
        raise ValueError(f"N (qweight.shape[1]) must be a positive multiple of 8, got {n}")
    if scales.dim() != 2 or scales.shape[1] != n or scales.shape[0] == 0 or not scales.is_floating_point():
        raise ValueError(f"scales must be floating (G, N) with N = {n}, got {scales.dtype} {tuple(scales.shape)}")
    if qzeros.dtype != torch.int32 or tuple(qzeros.shape) != (scales.shape[0], n // 8):
        raise ValueError(f"qzeros must be int32 (G, N/8) = ({scales.shape[0]}, {n // 8}), got {qzeros.dtype} {tuple(qzeros.shape)}")
    if g_idx.dtype != torch.int32 or tuple(g_idx.shape) != (k,):
        raise ValueError(f"g_idx must be int32 of shape (K,) = ({k},), got {g_idx.dtype} {tuple(g_idx.shape)}")
    for name, t in (("qweight", qweight), ("qzeros", qzeros), ("scales", scales), ("g_idx", g_idx)):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
        if t.device != a.device:
            raise ValueError(f"{name} is on {t.device} but a is on {a.device}")
    # END SOLUTION


def w4a16_matmul(a: Tensor, qweight: Tensor, qzeros: Tensor, scales: Tensor, g_idx: Tensor, *,
                 group_size: int = 0, split_k: int | None = None, block_m: int | None = None,
                 block_n: int | None = None, block_k: int | None = None) -> Tensor:
    """C = A @ W^T with W the GPTQ-v1 4-bit weight, dequantized inside the Triton GEMM.

    Args:
        a: (M, K) float16 or bfloat16 activations, any strides; K a multiple of 8.
        qweight (K/8, N) int32, qzeros (G, N/8) int32, scales (G, N) float, g_idx (K,) int32:
            the v1 tensors, contiguous, on a's device; N a multiple of 8.
        group_size: 0 reads g_idx for every input row (act-order, any g_idx); a positive value
            promises g_idx == arange(K) // group_size (sequential groups: the fast path, unchecked).
        split_k: K splits >= 1 (their fp32 partial sums are added in a fixed order by a second
            kernel); None picks choose_split_k's.
        block_m / block_n / block_k: powers of two >= 16; None: default_config(M, group_size).

    Returns (M, N) in a's dtype, accumulated in fp32. Raises ValueError on bad inputs or options.
    """
    _check_inputs(a, qweight, qzeros, scales, g_idx)
    cfg = default_config(a.shape[0], group_size if isinstance(group_size, int) else 0)
    cfg.update({key: v for key, v in (("block_m", block_m), ("block_n", block_n), ("block_k", block_k))
                if v is not None})
    for key in ("block_m", "block_n", "block_k"):
        if not _is_pow2(cfg[key]) or cfg[key] < 16:
            raise ValueError(f"{key} must be a power of two >= 16, got {cfg[key]!r}")
    if split_k is not None and (not isinstance(split_k, int) or isinstance(split_k, bool) or split_k < 1):
        raise ValueError(f"split_k must be a positive int or None, got {split_k!r}")
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 0:
        raise ValueError(f"group_size must be 0 or a positive int, got {group_size!r}")
    (m, k), n = a.shape, qweight.shape[1]
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0:
        return out
    # BEGIN SOLUTION
    bm, bn, bk = cfg["block_m"], cfg["block_n"], cfg["block_k"]
    if split_k is None:
        split_k = choose_split_k(m, n, k, bm, bn, bk, _num_sms(a.device),
                                 programs_per_sm(bm, bn, bk, cfg["num_stages"]))
    k_per_split = triton.cdiv(triton.cdiv(k, bk), split_k) * bk  # whole K tiles: none straddles splits
    c = out if split_k == 1 else torch.empty((split_k, m, n), dtype=torch.float32, device=a.device)
    stride_cs = 0 if split_k == 1 else c.stride(0)
    # The interpreter's tl.dot multiplies bf16 as raw bits and truncates casts: emulate in fp32.
    emulate_bf16 = _interpreting() and a.dtype == torch.bfloat16
    ptx = "" if _interpreting() else _planes_asm(0x43004300 if a.dtype == torch.bfloat16 else 0x64006400)
    if cfg.get("swapped", False) and group_size > 0 and group_size % bk == 0:
        _w4a16_swapped_kernel[(triton.cdiv(n, bn), triton.cdiv(m, bm), split_k)](
            a, qweight, qzeros, scales, c, m, n, k, k_per_split,
            a.stride(0), a.stride(1), qweight.stride(0), qweight.stride(1),
            qzeros.stride(0), qzeros.stride(1), scales.stride(0), scales.stride(1),
            stride_cs, c.stride(-2), c.stride(-1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_SIZE=group_size,
            EMULATE_BF16=emulate_bf16, PTX=ptx, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
        return _reduce_splits(c, out, split_k, emulate_bf16)
    planes = cfg.get("planes", True) and group_size > 0 and group_size % bk == 0 and bk >= 128  # >= 16 deep
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), split_k)
    _w4a16_kernel[grid](
        a, qweight, qzeros, scales, g_idx, c, m, n, k, k_per_split,
        a.stride(0), a.stride(1), qweight.stride(0), qweight.stride(1),
        qzeros.stride(0), qzeros.stride(1), scales.stride(0), scales.stride(1),
        stride_cs, c.stride(-2), c.stride(-1),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
        GROUP_SIZE=group_size, SCALE_AFTER_DOT=group_size > 0 and group_size % bk == 0,
        EMULATE_BF16=emulate_bf16, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
        PLANES=planes, PTX=ptx if planes else "",
    )
    return _reduce_splits(c, out, split_k, emulate_bf16)
    # END SOLUTION


def _reduce_splits(c: Tensor, out: Tensor, split_k: int, emulate_bf16: bool) -> Tensor:
    """out = the sum of the workspace c (split_k, M, N) over its splits (c is out itself when split_k = 1)."""
    # BEGIN SOLUTION
    if split_k > 1:
        block, mn = 1024, out.numel()
        _splitk_reduce_kernel[(triton.cdiv(mn, block),)](c, out, mn, SPLIT_K=split_k, BLOCK=block,
                                                         EMULATE_BF16=emulate_bf16, num_warps=4)
    return out
    # END SOLUTION
