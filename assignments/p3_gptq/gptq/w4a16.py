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
    raise NotImplementedError("p3.24: _planes_asm")


@triton.jit
def _planes(words, DT: tl.constexpr, MAGIC: tl.constexpr, PTX: tl.constexpr):
    """The 8 nibble planes of int32 words (R, C): plane t = MAGIC + ((words >> 4t) & 0xF) in DT, exact. On the
    GPU one PTX block (PTX = _planes_asm's) per two words makes their 16-bit pairs with 1-2 integer
    instructions each, no int -> float conversion (MAGIC + code is MAGIC's bits with the code in the low 4)."""
    raise NotImplementedError("p3.25: _planes")


@triton.jit
def _split8(a, BLOCK_M: tl.constexpr, BKW: tl.constexpr):
    """A tile (BLOCK_M, 8 * BKW) -> its 8 column planes (BLOCK_M, BKW): plane t holds columns 8j + t."""
    raise NotImplementedError("p3.26: _split8")


@triton.jit
def _join8(p0, p1, p2, p3, p4, p5, p6, p7, R: tl.constexpr, C: tl.constexpr):
    """8 planes (R, C) -> one tile (R, 8 * C) whose column 8j + t is plane t's column j (_split8 undone)."""
    raise NotImplementedError("p3.27: _join8")


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
    raise NotImplementedError("p3.28: _w4a16_kernel")


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
    raise NotImplementedError("p3.29: _w4a16_swapped_kernel")


@triton.jit
def _splitk_reduce_kernel(
    WS, Out, MN,  # WS: contiguous fp32 (SPLIT_K, M, N); Out: contiguous (M, N); MN = M * N
    SPLIT_K: tl.constexpr, BLOCK: tl.constexpr,
    EMULATE_BF16: tl.constexpr,  # interpreter only, see _round_bf16
):
    """Out = sum over s = 0, 1, ..., SPLIT_K-1 of WS[s] in that order (fp32), cast to Out's dtype."""
    raise NotImplementedError("p3.30: _splitk_reduce_kernel")


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
    raise NotImplementedError("p3.31: choose_split_k")


def _check_inputs(a: Tensor, qweight: Tensor, qzeros: Tensor, scales: Tensor, g_idx: Tensor) -> None:
    """Shapes, dtypes, layouts and devices of w4a16_matmul's tensors; ValueError naming the problem."""
    raise NotImplementedError("p3.32: _check_inputs")


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
    raise NotImplementedError("p3.33: w4a16_matmul")


def _reduce_splits(c: Tensor, out: Tensor, split_k: int, emulate_bf16: bool) -> Tensor:
    """out = the sum of the workspace c (split_k, M, N) over its splits (c is out itself when split_k = 1)."""
    raise NotImplementedError("p3.34: _reduce_splits")
