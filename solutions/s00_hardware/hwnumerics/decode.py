"""Upper bound on decode throughput: every step reads all weights plus every sequence's KV cache."""

from __future__ import annotations

from .roofline import Workload
from .specs import DeviceSpec, ModelSpec


def kv_bytes_per_token(model: ModelSpec) -> float:
    """Bytes one token occupies in the KV cache: 2 (K and V) * layers * kv heads * head dim * bytes.

    Example: Llama-3-8B (32 layers, 8 KV heads, head dim 128, bf16) -> 131072 bytes = 128 KiB.
    """
    # BEGIN SOLUTION
    return 2.0 * model.n_layers * model.n_kv_heads * model.head_dim * model.kv_bytes
    # END SOLUTION


def decode_step_workload(model: ModelSpec, batch: int, context: int) -> Workload:
    """One decode step producing one token for each of `batch` sequences.

    Each sequence already holds `context` tokens in the KV cache and attends to all of them.
    flops = batch * (2 * n_params + 4 * n_layers * context * hidden)
            (2 FLOPs per weight per token, plus Q K^T and P V over the context in every layer);
    bytes = n_params * dtype_bytes + batch * context * kv_bytes_per_token(model)
            (the weights are read once per step and shared by the batch; each sequence's KV cache
            is read once; activations and the new token's K/V writes are ignored).
    ValueError if batch < 1 or context < 0.
    """
    # BEGIN SOLUTION
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if context < 0:
        raise ValueError(f"context must be >= 0, got {context}")
    flops = batch * (2.0 * model.n_params + 4.0 * model.n_layers * context * model.hidden)
    weight_bytes = model.n_params * model.dtype_bytes
    kv_bytes = batch * context * kv_bytes_per_token(model)
    return Workload(flops=flops, bytes=weight_bytes + kv_bytes)
    # END SOLUTION


def decode_tokens_per_s_bound(
    model: ModelSpec, device: DeviceSpec, dtype: str, batch: int, context: int
) -> float:
    """Most tokens/s (summed over the batch) that decode can reach on `device` computing in `dtype`.

    A step cannot be faster than max(step flops / peak, step bytes / bandwidth), and it yields
    `batch` tokens. At small batch the bytes term wins: tokens/s ~ batch * bw / step bytes.
    """
    # BEGIN SOLUTION
    step = decode_step_workload(model, batch, context)
    step_time = max(step.flops / device.peak(dtype), step.bytes / device.mem_bw)
    return batch / step_time
    # END SOLUTION
