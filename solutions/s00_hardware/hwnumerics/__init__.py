"""Stage 0: what the GPU is doing, in numbers -- rooflines, number formats, honest timing."""

from .decode import decode_step_workload, decode_tokens_per_s_bound, kv_bytes_per_token, params_read_per_step
from .formats import BF16, FP8_E4M3, FP8_E5M2, FP16, FloatFormat, from_bits, round_to_format, to_bits
from .microbench import copy_bandwidth, gemm_tflops
from .occupancy import (
    Occupancy,
    SMLimits,
    hopper_limits,
    matmul_tile_smem_bytes,
    max_num_stages,
    occupancy,
    regs_per_warp,
    smem_per_block,
    tile_fits,
)
from .roofline import RooflinePoint, Workload, analyze, attainable_flops, ridge_point
from .scaling import ScaledTensor, dequantize, quantize_per_block, quantize_per_tensor
from .specs import H100_SXM, H200, DeviceSpec, ModelSpec
from .timing import BenchStats, benchmark, summarize
from .workloads import (
    attention_decode_workload,
    attention_prefill_workload,
    gemm_workload,
    gemv_workload,
)

__all__ = [
    "BF16",
    "FP8_E4M3",
    "FP8_E5M2",
    "FP16",
    "H100_SXM",
    "H200",
    "BenchStats",
    "DeviceSpec",
    "FloatFormat",
    "ModelSpec",
    "Occupancy",
    "RooflinePoint",
    "SMLimits",
    "ScaledTensor",
    "Workload",
    "analyze",
    "attainable_flops",
    "attention_decode_workload",
    "attention_prefill_workload",
    "benchmark",
    "copy_bandwidth",
    "decode_step_workload",
    "decode_tokens_per_s_bound",
    "dequantize",
    "from_bits",
    "gemm_tflops",
    "gemm_workload",
    "gemv_workload",
    "hopper_limits",
    "kv_bytes_per_token",
    "matmul_tile_smem_bytes",
    "max_num_stages",
    "occupancy",
    "params_read_per_step",
    "quantize_per_block",
    "quantize_per_tensor",
    "regs_per_warp",
    "ridge_point",
    "round_to_format",
    "smem_per_block",
    "summarize",
    "tile_fits",
    "to_bits",
]
