"""Hidden: the occupancy rules students get wrong -- register granularity and sub-partitions, partial
warps, the reserved shared memory and its rounding, per-block vs per-SM shared memory, launches that
cannot fit, other architectures' limits. Oracle: hand arithmetic from the CUDA occupancy rules
(`cuda_occupancy.h`; CUDA C++ Programming Guide, compute capability table)."""

import pytest
from hwnumerics import (
    SMLimits,
    matmul_tile_smem_bytes,
    max_num_stages,
    occupancy,
    regs_per_warp,
    smem_per_block,
    tile_fits,
)

KIB = 1024
COMMON = {"warp_size": 32, "max_threads_per_block": 1024, "regs_per_sm": 65536, "max_regs_per_thread": 255,
          "reg_alloc_unit": 256, "reg_sub_partitions": 4, "smem_reserved_per_block": 1 * KIB, "smem_alloc_unit": 128}
H = SMLimits("hopper", sm_count=132, max_threads_per_sm=2048, max_blocks_per_sm=32, smem_per_sm=228 * KIB,
             smem_per_block_optin=227 * KIB, **COMMON)
# A100 (CC 8.0): 108 SMs, 164 KB of shared memory per SM, 163 KB per block.
A100 = SMLimits("a100", sm_count=108, max_threads_per_sm=2048, max_blocks_per_sm=32, smem_per_sm=164 * KIB,
                smem_per_block_optin=163 * KIB, **COMMON)
# CC 8.9 (L40S, RTX 4090): 1536 threads (48 warps) and 24 blocks per SM, 100 KB per SM, 99 KB per block.
ADA = SMLimits("ada", sm_count=142, max_threads_per_sm=1536, max_blocks_per_sm=24, smem_per_sm=100 * KIB,
               smem_per_block_optin=99 * KIB, **COMMON)


def blocks(limits, threads, regs, smem):
    return occupancy(limits, threads_per_block=threads, regs_per_thread=regs, smem_bytes=smem)


@pytest.mark.points(2)
def test_register_rounding_to_256_costs_blocks():
    # 41 registers: 1312 a warp rounds up to 1536 -> 16384 // 1536 = 10 warps a sub-partition, 40 an
    # SM, 10 blocks of 4 warps (unrounded, 1312 would give 12 warps, 48, 12 blocks).
    assert regs_per_warp(41, H) == 1536
    occ = blocks(H, 128, 41, 0)
    assert (occ.by_registers, occ.blocks_per_sm, occ.limited_by) == (10, 10, ("registers",))


@pytest.mark.points(2)
def test_registers_are_split_among_four_sub_partitions():
    # 48 registers -> 1536 a warp. A sub-partition holds 16384 // 1536 = 10 warps, the SM 40 (not
    # 65536 // 1536 = 42): 20 blocks of 2 warps, not 21.
    assert blocks(H, 64, 48, 0).by_registers == 20
    # 80 registers -> 2560 a warp: 6 warps a sub-partition, 24 an SM (65536 // 2560 would say 25).
    occ = blocks(H, 32, 80, 0)
    assert (occ.by_registers, occ.blocks_per_sm, occ.limited_by) == (24, 24, ("registers",))


@pytest.mark.points(2)
def test_a_partial_warp_takes_a_whole_warp():
    # 100 threads = 4 warps (the last one 4/32 full): threads allow 64 // 4 = 16 blocks; 48
    # registers give 40 warps -> 10 blocks; occupancy counts warps: 40 / 64.
    occ = blocks(H, 100, 48, 0)
    assert (occ.by_threads, occ.by_registers, occ.blocks_per_sm, occ.warps_per_sm) == (16, 10, 10, 40)
    assert occ.occupancy == pytest.approx(40 / 64, abs=1e-12)
    assert blocks(H, 33, 16, 0).by_threads == 32  # 2 warps a block


@pytest.mark.points(2)
def test_the_reserved_kib_and_the_128_byte_rounding_cost_blocks():
    # 32 KiB: 32_768 + 1024 = 33_792 -> 233_472 // 33_792 = 6 blocks (7 without the reservation)
    occ = blocks(H, 128, 32, 32 * KIB)
    assert (occ.by_smem, occ.blocks_per_sm, occ.limited_by) == (6, 6, ("smem",))
    # 10_000 bytes: 11_024 -> 11_136 -> 20 blocks (21 without the rounding)
    assert blocks(H, 32, 16, 10_000).by_smem == 20
    # Two blocks of 113.5 KiB do not share an SM: 116_224 + 1024 = 117_248 > 228 KiB / 2
    assert smem_per_block(116_224, H) == 117_248
    assert blocks(H, 128, 32, 116_224).blocks_per_sm == 1


@pytest.mark.points(2)
def test_launches_that_cannot_fit_get_zero_blocks_and_name_the_resource():
    # 227 KiB is the most one block may use; one byte more cannot launch at all.
    assert blocks(H, 128, 32, 227 * KIB).by_smem == 1
    over = blocks(H, 128, 32, 227 * KIB + 1)
    assert (over.by_smem, over.blocks_per_sm, over.warps_per_sm, over.limited_by) == (0, 0, 0, ("smem",))
    assert over.occupancy == 0.0
    # 1025 threads exceed the block size limit
    assert blocks(H, 1025, 32, 0).limited_by == ("threads",) and blocks(H, 1025, 32, 0).blocks_per_sm == 0
    # 256 registers exceed the 255 a thread may use
    assert blocks(H, 32, 256, 0).by_registers == 0
    # 255 registers: 8192 a warp, 2 warps a sub-partition, 8 an SM: a 1024-thread block cannot launch,
    # a 256-thread block fits once.
    assert blocks(H, 1024, 255, 0).by_registers == 0
    assert blocks(H, 256, 255, 0).by_registers == 1


@pytest.mark.points(2)
def test_tiles_fit_the_per_block_limit_not_the_sms_capacity():
    # 32 x 64 x 64 bf16 is 12_288 bytes a stage: 19 stages = 233_472 bytes = the SM's 228 KiB, which
    # no block may have (227 KiB at most, the rest holds the driver's reserved 1 KiB).
    assert matmul_tile_smem_bytes(32, 64, 64, 2, 19) == 233_472
    assert not tile_fits(32, 64, 64, 2, 19, H)
    assert tile_fits(32, 64, 64, 2, 18, H)
    assert max_num_stages(32, 64, 64, 2, H) == 18
    # Exactly the per-block limit fits (<=, not <): (113 x 512 + 512 x 114) x 2 = 232_448 = 227 KiB.
    assert matmul_tile_smem_bytes(113, 114, 512, 2, 1) == 227 * 1024
    assert tile_fits(113, 114, 512, 2, 1, H) and not tile_fits(113, 115, 512, 2, 1, H)


@pytest.mark.points(1)
def test_max_num_stages_is_zero_when_one_stage_does_not_fit():
    assert matmul_tile_smem_bytes(256, 256, 256, 2, 1) == 262_144
    assert max_num_stages(256, 256, 256, 2, H) == 0
    assert max_num_stages(128, 256, 128, 1, H) == 4  # fp8: 49_152 a stage -> 232_448 // 49_152
    assert tile_fits(128, 128, 32, 4, 7, H)  # fp32 (tf32): 7 * 32_768 = 229_376


@pytest.mark.points(2)
def test_other_architectures_use_their_own_limits():
    # A100: 48 KiB -> 50_176 a block -> 167_936 // 50_176 = 3 blocks
    assert blocks(A100, 128, 32, 48 * KIB).by_smem == 3
    assert max_num_stages(128, 128, 64, 2, A100) == 5  # 166_912 // 32_768
    # Ada: 48 warps and 24 blocks a SM: 32-thread blocks -> 24 (block slots), 512-thread -> 3 (threads)
    assert blocks(ADA, 32, 16, 0).limited_by == ("blocks",) and blocks(ADA, 32, 16, 0).blocks_per_sm == 24
    occ = blocks(ADA, 512, 32, 0)
    assert (occ.by_threads, occ.blocks_per_sm, occ.limited_by) == (3, 3, ("threads",))
    assert occ.occupancy == pytest.approx(1.0, abs=1e-12)  # 48 of 48 warps
    assert not tile_fits(128, 128, 64, 2, 4, ADA)  # 131_072 > 101_376


@pytest.mark.points(1)
def test_bad_arguments_raise_value_error():
    # the valid edges beside each refused argument (a function that always raises earns nothing)
    assert occupancy(H, threads_per_block=32, regs_per_thread=1, smem_bytes=0).blocks_per_sm > 0
    assert matmul_tile_smem_bytes(128, 128, 64, 2, 1) > 0 and regs_per_warp(1, H) > 0 and smem_per_block(0, H) >= 0
    for kwargs in ({"threads_per_block": 0, "regs_per_thread": 32, "smem_bytes": 0},
                   {"threads_per_block": 32, "regs_per_thread": 0, "smem_bytes": 0},
                   {"threads_per_block": 32, "regs_per_thread": 32, "smem_bytes": -1}):
        with pytest.raises(ValueError):
            occupancy(H, **kwargs)
    with pytest.raises(ValueError):
        matmul_tile_smem_bytes(128, 128, 0, 2, 3)
    with pytest.raises(ValueError):
        matmul_tile_smem_bytes(128, 128, 64, 2, 0)
    with pytest.raises(ValueError):
        regs_per_warp(0, H)
    with pytest.raises(ValueError):
        smem_per_block(-1, H)
