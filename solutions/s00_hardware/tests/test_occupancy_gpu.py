"""GPU tier (H100 SXM / H200 only): the student's Hopper limits against what this GPU reports, and the
student's occupancy against the CUDA driver's own calculator for real compiled Triton kernels.

Oracles: torch.cuda.get_device_properties(0) and the CUDA driver's cuDeviceGetAttribute for the
limits; cuOccupancyMaxActiveBlocksPerMultiprocessor on the kernels' CUfunction handles for the
resident blocks; Triton's compiled metadata (n_regs, shared, num_warps) for the kernels' resources.
"""

import ctypes

import pytest
import torch
import triton
import triton.language as tl
from hwnumerics import SMLimits, hopper_limits, matmul_tile_smem_bytes, occupancy

KIB = 1024
# The same table as tests/test_occupancy.py (CUDA C++ Programming Guide, compute capability 9.0).
HOPPER = SMLimits("hopper (test table)", sm_count=132, warp_size=32, max_threads_per_block=1024,
                  max_threads_per_sm=2048, max_blocks_per_sm=32, regs_per_sm=65536, max_regs_per_thread=255,
                  reg_alloc_unit=256, reg_sub_partitions=4, smem_per_sm=228 * KIB, smem_per_block_optin=227 * KIB,
                  smem_reserved_per_block=1 * KIB, smem_alloc_unit=128)

# CUdevice_attribute values (cuda.h)
ATTR = {"max_threads_per_block": 1, "warp_size": 10, "sm_count": 16, "max_threads_per_sm": 39,
        "smem_per_sm": 81, "regs_per_sm": 82, "smem_per_block_optin": 97, "max_blocks_per_sm": 106,
        "smem_reserved_per_block": 111}
# the same limits under torch's names, where this torch exposes them
TORCH_NAMES = {"sm_count": "multi_processor_count", "warp_size": "warp_size",
               "max_threads_per_sm": "max_threads_per_multi_processor", "regs_per_sm": "regs_per_multiprocessor",
               "smem_per_sm": "shared_memory_per_multiprocessor", "smem_per_block_optin": "shared_memory_per_block_optin",
               "max_threads_per_block": "max_threads_per_block"}
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def _libcuda():
    lib = ctypes.CDLL("libcuda.so.1")
    assert lib.cuInit(0) == 0
    return lib


def driver_attribute(attr: int) -> int:
    lib, dev, value = _libcuda(), ctypes.c_int(), ctypes.c_int()
    assert lib.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert lib.cuDeviceGetAttribute(ctypes.byref(value), attr, dev) == 0
    return value.value


def driver_occupancy(function_handle: int, threads: int, dynamic_smem: int) -> int:
    """The driver's resident blocks per SM for a loaded kernel, its block size and dynamic shared memory."""
    lib, blocks = _libcuda(), ctypes.c_int()
    func = ctypes.c_void_p(function_handle)
    # allow the dynamic shared memory the launch uses (Triton already opted in above 48 KiB when it
    # loaded the kernel; a driver that refuses this attribute keeps Triton's setting)
    lib.cuFuncSetAttribute(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, ctypes.c_int(dynamic_smem))
    rc = lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(blocks), func, ctypes.c_int(threads),
                                                         ctypes.c_size_t(dynamic_smem))
    assert rc == 0, f"cuOccupancyMaxActiveBlocksPerMultiprocessor returned {rc}"
    return blocks.value


@pytest.fixture
def hopper_gpu():
    """Skips (not graded here) unless this is a CUDA GPU of compute capability 9.0 with 132 SMs."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    props = torch.cuda.get_device_properties(0)
    if (props.major, props.minor) != (9, 0) or props.multi_processor_count != 132:
        pytest.skip(f"needs an H100 SXM or H200 (CC 9.0, 132 SMs), this is {props.name}")
    return props


@pytest.mark.gpu
@pytest.mark.points(2)
def test_hopper_limits_match_this_gpu(hopper_gpu):
    limits = hopper_limits()
    for field, attr in ATTR.items():
        reported = driver_attribute(attr)
        assert getattr(limits, field) == reported, f"{field}: yours {getattr(limits, field)}, the driver {reported}"
        torch_name = TORCH_NAMES.get(field)
        if torch_name is not None and hasattr(hopper_gpu, torch_name):
            assert getattr(hopper_gpu, torch_name) == reported, f"torch {torch_name} disagrees with the driver"


@triton.jit
def _matmul(a, b, c, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * s_am + (k + rk)[None, :] * s_ak)
        y = tl.load(b + (k + rk)[:, None] * s_bk + rn[None, :] * s_bn)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * s_cm + rn[None, :] * s_cn, acc.to(c.dtype.element_ty))


@triton.jit
def _scale(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=mask) * 2.0, mask=mask)


# (BM, BN, BK, num_warps, num_stages). Compiled for sm_90 by Triton 3.9 with aligned inputs, these
# keep exactly num_stages * (BM*BK + BK*BN) * 2 bytes of shared memory (checked by compiling for
# the target without a GPU); their occupancy is limited by shared memory or by registers.
MATMUL_CONFIGS = [(128, 128, 64, 4, 3), (128, 128, 64, 8, 4), (64, 64, 32, 4, 2), (64, 128, 64, 4, 1),
                  (128, 256, 64, 8, 3), (64, 256, 32, 8, 4)]


def _compiled_matmul(bm, bn, bk, warps, stages):
    m = n = k = 512
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    kernel = _matmul[(m // bm, n // bn)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                         c.stride(0), c.stride(1), BM=bm, BN=bn, BK=bk,
                                         num_warps=warps, num_stages=stages)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-1)  # bf16 output
    return kernel


def _compiled_scale(block, warps):
    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    kernel = _scale[(x.numel() // block,)](x, y, x.numel(), BLOCK=block, num_warps=warps)
    torch.cuda.synchronize()
    return kernel


@pytest.mark.gpu
@pytest.mark.points(3)
def test_occupancy_agrees_with_the_driver_for_compiled_triton_kernels(hopper_gpu):
    cases = []
    for bm, bn, bk, warps, stages in MATMUL_CONFIGS:
        kernel = _compiled_matmul(bm, bn, bk, warps, stages)
        # the tile arithmetic predicts what the compiler allocated
        assert matmul_tile_smem_bytes(bm, bn, bk, 2, stages) == kernel.metadata.shared, (bm, bn, bk, warps, stages)
        cases.append((f"matmul {bm}x{bn}x{bk} w{warps} s{stages}", kernel))
    for block, warps in ((1024, 4), (256, 1), (4096, 8)):
        cases.append((f"scale {block} w{warps}", _compiled_scale(block, warps)))
    seen_limits = set()
    for name, kernel in cases:
        threads = kernel.metadata.num_warps * 32
        ours = occupancy(HOPPER, threads_per_block=threads, regs_per_thread=kernel.n_regs,
                         smem_bytes=kernel.metadata.shared)
        driver = driver_occupancy(kernel.function, threads, kernel.metadata.shared)
        print(f"{name}: {kernel.n_regs} regs, {kernel.metadata.shared} B smem, {threads} threads -> "
              f"driver {driver}, yours {ours.blocks_per_sm} {ours.limited_by}")
        assert ours.blocks_per_sm == driver, f"{name}: yours {ours.blocks_per_sm} blocks/SM, the driver {driver}"
        seen_limits.update(ours.limited_by)
    print(f"limits seen: {sorted(seen_limits)}")
