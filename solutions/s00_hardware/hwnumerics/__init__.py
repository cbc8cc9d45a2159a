"""Stage 0: what the GPU is doing, in numbers -- rooflines, number formats, honest timing."""

from .decode import decode_step_workload, decode_tokens_per_s_bound, kv_bytes_per_token
from .formats import BF16, FP8_E4M3, FP8_E5M2, FP16, FloatFormat, from_bits, round_to_format, to_bits
from .microbench import copy_bandwidth, gemm_tflops
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
    "BF16", "FP16", "FP8_E4M3", "FP8_E5M2", "FloatFormat", "to_bits", "from_bits", "round_to_format",
    "ScaledTensor", "quantize_per_tensor", "quantize_per_block", "dequantize",
    "DeviceSpec", "ModelSpec", "H100_SXM", "H200",
    "Workload", "RooflinePoint", "ridge_point", "attainable_flops", "analyze",
    "gemm_workload", "gemv_workload", "attention_prefill_workload", "attention_decode_workload",
    "kv_bytes_per_token", "decode_step_workload", "decode_tokens_per_s_bound",
    "BenchStats", "summarize", "benchmark", "copy_bandwidth", "gemm_tflops",
]
