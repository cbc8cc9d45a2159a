"""P3: GPTQ 4-bit weight quantization, its v1 checkpoint layout, and a W4A16 Triton GEMM.

    quantizer.py  QuantConfig, QuantResult, qparams, quantize_codes, rtn (round-to-nearest)
    gptq.py       GPTQ: add_batch (Hessian), quantize (the column loop with lazy batches)
    magic.py      magic_registers, dequant_word(_scaled): the magic-number fp16 trick in plain Python
    pack.py       pack_int4 / unpack_int4, pack_v1 / dequantize_v1, save_checkpoint / load_checkpoint
    w4a16.py      w4a16_matmul: C = A @ W^T with W dequantized inside a Triton GEMM
    engine.py     W4A16Linear and minivllm's "gptq" loader (import gptq.engine to register it)
"""

from .gptq import GPTQ, inverse_cholesky, prepare
from .magic import dequant_word, dequant_word_scaled, magic_registers
from .pack import dequantize_v1, load_checkpoint, pack_int4, pack_v1, quantization_config, save_checkpoint, unpack_int4
from .quantizer import QuantConfig, QuantResult, group_count, qparams, quantize_codes, rtn
from .w4a16 import choose_split_k, default_config, w4a16_matmul

__all__ = [
    "GPTQ", "QuantConfig", "QuantResult", "choose_split_k", "default_config", "dequant_word", "dequant_word_scaled",
    "dequantize_v1", "group_count", "inverse_cholesky", "load_checkpoint", "magic_registers", "pack_int4", "pack_v1",
    "prepare", "qparams", "quantization_config", "quantize_codes", "rtn", "save_checkpoint", "unpack_int4",
    "w4a16_matmul",
]
