"""Occupancy and tile arithmetic on Hopper, checked against hand arithmetic from the CUDA occupancy
rules (CUDA C++ Programming Guide, compute capability table; `cuda_occupancy.h` of the CUDA Toolkit,
the rules behind cudaOccupancyMaxActiveBlocksPerMultiprocessor and Nsight Compute's calculator)."""

import pytest
from hwnumerics import (
    SMLimits,
    hopper_limits,
    matmul_tile_smem_bytes,
    max_num_stages,
    occupancy,
    regs_per_warp,
    smem_per_block,
    tile_fits,
)

KIB = 1024
# Compute capability 9.0 (H100 SXM, H200): CUDA C++ Programming Guide, "Technical Specifications per
# Compute Capability"; Hopper Tuning Guide 1.4.1.1 (64 warps, 32 blocks, 64K registers, 255 per
# thread, 228 KB per SM, 227 KB per block); allocation units and the 4 register sub-partitions
# from cuda_occupancy.h; the 1 KB reserved per block from the programming guide (CC >= 8.0).
HOPPER = {
    "sm_count": 132, "warp_size": 32, "max_threads_per_block": 1024, "max_threads_per_sm": 2048,
    "max_blocks_per_sm": 32, "regs_per_sm": 65536, "max_regs_per_thread": 255, "reg_alloc_unit": 256,
    "reg_sub_partitions": 4, "smem_per_sm": 228 * KIB, "smem_per_block_optin": 227 * KIB,
    "smem_reserved_per_block": 1 * KIB, "smem_alloc_unit": 128,
}
H = SMLimits("hopper (test table)", **HOPPER)


@pytest.mark.points(2)
def test_hopper_limits_match_the_programming_guide():
    limits = hopper_limits()
    for field, value in HOPPER.items():
        assert getattr(limits, field) == value, f"{field}: {getattr(limits, field)} != {value}"
    assert limits.max_warps_per_sm == 64


@pytest.mark.points(1)
def test_registers_are_given_to_a_warp_in_units_of_256():
    assert regs_per_warp(32, H) == 1024  # 32 * 32, a multiple of 256
    assert regs_per_warp(40, H) == 1280  # 40 * 32 = 1280 = 5 * 256
    assert regs_per_warp(41, H) == 1536  # 41 * 32 = 1312 -> 6 * 256
    assert regs_per_warp(255, H) == 8192  # 8160 -> 32 * 256


@pytest.mark.points(1)
def test_a_blocks_shared_memory_adds_the_reserved_kib_and_rounds_up_to_128_bytes():
    assert smem_per_block(0, H) == 1024  # the driver's 1 KiB even for a kernel with none
    assert smem_per_block(10_000, H) == 11_136  # 11_024 -> 87 * 128
    assert smem_per_block(48 * KIB, H) == 50_176  # 49_152 + 1024, already a multiple of 128
    assert smem_per_block(98_304, H) == 99_328  # a 128x128x64 bf16 3-stage Triton matmul


@pytest.mark.points(2)
def test_a_register_hungry_kernel_is_limited_by_registers():
    # 256 threads = 8 warps of 64 * 32 = 2048 registers; a sub-partition (16384 registers) holds 8
    # warps, the SM 32: 4 blocks. Threads alone would allow 64 // 8 = 8, shared memory 228.
    occ = occupancy(H, threads_per_block=256, regs_per_thread=64, smem_bytes=0)
    assert (occ.by_threads, occ.by_blocks, occ.by_registers, occ.by_smem) == (8, 32, 4, 228)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limited_by) == (4, 32, ("registers",))
    assert occ.occupancy == pytest.approx(0.5, abs=1e-12)


@pytest.mark.points(1)
def test_one_warp_blocks_are_limited_by_the_block_slots():
    # 32 threads, 16 registers, no shared memory: threads allow 64 blocks, registers 4 * (16384 //
    # 512) = 128, shared memory 233_472 // 1024 = 228, but an SM holds at most 32 blocks.
    occ = occupancy(H, threads_per_block=32, regs_per_thread=16, smem_bytes=0)
    assert (occ.by_threads, occ.by_blocks, occ.by_registers, occ.by_smem) == (64, 32, 128, 228)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limited_by) == (32, 32, ("blocks",))
    assert occ.occupancy == pytest.approx(0.5, abs=1e-12)


@pytest.mark.points(2)
def test_a_pipelined_matmul_is_limited_by_shared_memory():
    # Triton 128x128x64 bf16, 3 stages, 4 warps, 168 registers: 98_304 + 1024 = 99_328 bytes a block
    # -> 233_472 // 99_328 = 2 blocks; registers 168 * 32 = 5376 -> 3 warps a sub-partition -> 12
    # warps -> 3 blocks; threads 16. Two blocks of 4 warps: occupancy 8 / 64.
    occ = occupancy(H, threads_per_block=128, regs_per_thread=168, smem_bytes=98_304)
    assert (occ.by_threads, occ.by_blocks, occ.by_registers, occ.by_smem) == (16, 32, 3, 2)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limited_by) == (2, 8, ("smem",))
    assert occ.occupancy == pytest.approx(0.125, abs=1e-12)


@pytest.mark.points(1)
def test_full_occupancy_with_1024_thread_blocks_hits_threads_and_registers_together():
    # 32 warps a block: threads allow 2 blocks; 32 registers -> 1024 a warp -> 16 warps a
    # sub-partition -> 64 warps -> 2 blocks as well. Both limits are named, in the fixed order.
    occ = occupancy(H, threads_per_block=1024, regs_per_thread=32, smem_bytes=0)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limited_by) == (2, 64, ("threads", "registers"))
    assert occ.occupancy == pytest.approx(1.0, abs=1e-12)


@pytest.mark.points(2)
def test_matmul_tile_bytes_count_every_pipeline_stage():
    # num_stages * (BM*BK + BK*BN) * bytes
    assert matmul_tile_smem_bytes(128, 128, 64, 2, 3) == 98_304  # 3 * 16_384 * 2
    assert matmul_tile_smem_bytes(128, 256, 64, 2, 4) == 196_608  # 4 * 24_576 * 2
    assert matmul_tile_smem_bytes(64, 64, 32, 1, 2) == 8_192  # fp8: 2 * 4096 * 1
    assert tile_fits(128, 256, 64, 2, 4, H)  # 192 KiB <= 227 KiB
    assert not tile_fits(256, 256, 64, 2, 4, H)  # 4 * 32_768 * 2 = 262_144 > 232_448
    assert max_num_stages(128, 128, 64, 2, H) == 7  # 232_448 // 32_768
