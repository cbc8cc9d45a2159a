"""Occupancy: how many blocks of a kernel one SM holds at once, and whether a Triton matmul tile fits
in shared memory.

An SM runs a block only when all of its warps, registers and shared memory fit beside the blocks
already resident; whatever runs out first caps the number of resident blocks. The rules are the
CUDA occupancy calculator's (`cuda_occupancy.h` in the CUDA Toolkit, the Nsight Compute occupancy
calculator), with the per-architecture figures of the CUDA C++ Programming Guide's compute
capability table.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

Limiter = Literal["threads", "blocks", "registers", "smem"]


@dataclass(frozen=True)
class SMLimits:
    """Per-SM resource limits of one GPU: the numbers the occupancy rules use.

    sm_count: SMs on the chip.  warp_size: threads per warp.
    max_threads_per_block: the largest block a kernel may be launched with.
    max_threads_per_sm: threads resident on one SM at once (max_warps_per_sm = this / warp_size).
    max_blocks_per_sm: blocks resident on one SM at once, however small they are.
    regs_per_sm: 32-bit registers in one SM's register file.
    max_regs_per_thread: the most registers one thread may use.
    reg_alloc_unit: registers are given to a warp in multiples of this many.
    reg_sub_partitions: the register file is split evenly among this many SM sub-partitions (one
        per warp scheduler); all the registers of a warp live in one of them.
    smem_per_sm: shared memory of one SM at the largest shared-memory carveout, in bytes.
    smem_per_block_optin: the most shared memory one block may use (after the kernel opts in to
        more than the default 48 KiB, as Triton does), in bytes.
    smem_reserved_per_block: bytes the CUDA driver reserves in shared memory for every resident
        block, on top of what the kernel asks for.
    smem_alloc_unit: a block's shared memory is allocated in multiples of this many bytes.
    """

    name: str
    sm_count: int
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int
    max_regs_per_thread: int
    reg_alloc_unit: int
    reg_sub_partitions: int
    smem_per_sm: int
    smem_per_block_optin: int
    smem_reserved_per_block: int
    smem_alloc_unit: int

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "name":
                continue
            value = getattr(self, f.name)
            least = 0 if f.name == "smem_reserved_per_block" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"SMLimits {self.name!r}: {f.name} must be an int >= {least}, got {value!r}")

    @property
    def max_warps_per_sm(self) -> int:
        """Warps resident on one SM at once."""
        return self.max_threads_per_sm // self.warp_size


@dataclass(frozen=True)
class Occupancy:
    """How many blocks of one kernel an SM holds at once, and what stops it holding more.

    by_threads, by_blocks, by_registers, by_smem: the most resident blocks each resource allows on
    its own (0 when one block alone does not fit that resource: the launch would fail).
    blocks_per_sm: the least of the four.  warps_per_sm: blocks_per_sm * warps per block.
    occupancy: warps_per_sm / max warps per SM, in [0, 1].
    limited_by: the names of every limit equal to blocks_per_sm, in the order
        ("threads", "blocks", "registers", "smem").
    """

    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float
    limited_by: tuple[Limiter, ...]
    by_threads: int
    by_blocks: int
    by_registers: int
    by_smem: int


def hopper_limits() -> SMLimits:
    """The limits of an H100 SXM or an H200 (compute capability 9.0; both have 132 SMs).

    Take them from the CUDA C++ Programming Guide's table of technical specifications per compute
    capability and the Hopper Tuning Guide: 32 threads per warp; blocks of at most 1024 threads;
    2048 resident threads (64 warps) and 32 resident blocks per SM; 64 Ki 32-bit registers per SM,
    at most 255 per thread, given to warps in units of 256 registers, the register file split
    over 4 sub-partitions; 228 KiB of shared memory per SM, at most 227 KiB per block, 1 KiB
    reserved by the driver per block, allocated in units of 128 bytes. All sizes in bytes
    (1 KiB = 1024 bytes). name = "H100 SXM / H200".
    """
    raise NotImplementedError("s00.9: hopper_limits")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def regs_per_warp(regs_per_thread: int, limits: SMLimits) -> int:
    """Registers one warp of the kernel is given: regs_per_thread * warp_size, rounded up to a
    multiple of limits.reg_alloc_unit.

    Example (Hopper): 40 registers per thread -> 1280 (already a multiple of 256); 41 -> 1312,
    rounded up to 1536. ValueError if regs_per_thread < 1.
    """
    raise NotImplementedError("s00.10: regs_per_warp")


def smem_per_block(smem_bytes: int, limits: SMLimits) -> int:
    """Shared memory one resident block takes from its SM: the kernel's own smem_bytes (static plus
    dynamic; Triton reports it as `kernel.metadata.shared`) plus the driver's
    limits.smem_reserved_per_block, rounded up to a multiple of limits.smem_alloc_unit.

    Example (Hopper): 0 -> 1024; 10_000 -> 11_024 rounded up to 11_136; 48 KiB -> 50_176.
    ValueError if smem_bytes < 0.
    """
    raise NotImplementedError("s00.11: smem_per_block")


def occupancy(limits: SMLimits, *, threads_per_block: int, regs_per_thread: int, smem_bytes: int) -> Occupancy:
    """Resident blocks per SM of a kernel launched with `threads_per_block` threads per block, each
    thread using `regs_per_thread` registers, each block `smem_bytes` of shared memory.

    A block takes w = ceil(threads_per_block / warp_size) warps (a partial warp is a whole warp).
    - by_threads = max_warps_per_sm // w; 0 if threads_per_block > max_threads_per_block.
    - by_blocks = max_blocks_per_sm.
    - by_registers: each warp takes r = regs_per_warp(regs_per_thread) registers from one
      sub-partition, which holds (regs_per_sm // reg_sub_partitions) // r warps; the SM holds
      reg_sub_partitions times that, so by_registers = that // w.
      0 if regs_per_thread > max_regs_per_thread.
    - by_smem = smem_per_sm // smem_per_block(smem_bytes); 0 if smem_bytes > smem_per_block_optin
      (the per-*block* limit, not the SM's capacity).
    blocks_per_sm is the least of the four; see Occupancy for the other fields.
    Example (Hopper): 256 threads, 64 registers, no shared memory -> registers: 2048 per warp,
    4 * (16384 // 2048) = 32 warps, 4 blocks of 8 warps; occupancy 0.5, limited_by ("registers",).
    ValueError if threads_per_block < 1, regs_per_thread < 1 or smem_bytes < 0.
    """
    raise NotImplementedError("s00.12: occupancy")


def matmul_tile_smem_bytes(block_m: int, block_n: int, block_k: int, dtype_bytes: int, num_stages: int) -> int:
    """Shared memory a pipelined Triton matmul kernel holds for its operand tiles, in bytes.

    Each stage of the software pipeline keeps one BLOCK_M x BLOCK_K tile of A and one
    BLOCK_K x BLOCK_N tile of B, so that loads for the next iterations overlap the current dot:
    num_stages * (block_m * block_k + block_k * block_n) * dtype_bytes.
    (What Triton 3.x allocates for `tl.dot` on aligned inputs on Hopper; the accumulator lives in
    registers.) Example: 128 x 128 x 64 bf16, 3 stages -> 3 * 16384 * 2 = 98_304 bytes.
    ValueError if any argument is < 1.
    """
    raise NotImplementedError("s00.13: matmul_tile_smem_bytes")


def tile_fits(
    block_m: int, block_n: int, block_k: int, dtype_bytes: int, num_stages: int, limits: SMLimits
) -> bool:
    """Whether a block of that matmul can launch at all: its tiles' bytes
    (matmul_tile_smem_bytes) are at most limits.smem_per_block_optin (227 KiB on Hopper; the
    SM's 228 KiB also holds the driver's reserved 1 KiB).
    """
    raise NotImplementedError("s00.14: tile_fits")


def max_num_stages(block_m: int, block_n: int, block_k: int, dtype_bytes: int, limits: SMLimits) -> int:
    """The deepest pipeline whose tiles fit one block: the largest num_stages with
    tile_fits(...) true; 0 if not even one stage fits.

    Example (Hopper): 128 x 128 x 64 bf16 takes 32_768 bytes a stage -> 232_448 // 32_768 = 7.
    """
    raise NotImplementedError("s00.15: max_num_stages")
