"""FLOPs and minimum main-memory traffic of the kernels that dominate LLM inference.

Bytes are the ideal traffic of a fused kernel: every input read once, every output written once,
nothing spilled (the S x S attention scores of a FlashAttention-style kernel never reach memory).
A multiply-add counts as 2 FLOPs.
"""

from __future__ import annotations

from .roofline import Workload


def _check_positive(**sizes: float) -> None:
    for name, value in sizes.items():
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")


def gemm_workload(m: int, n: int, k: int, dtype_bytes: float) -> Workload:
    """C = A @ B with A: (m, k), B: (k, n), C: (m, n), all elements of `dtype_bytes` bytes.

    flops = 2 * m * n * k;  bytes = (m*k + k*n + m*n) * dtype_bytes.
    ValueError if a size is not positive.
    """
    # BEGIN SOLUTION
    _check_positive(m=m, n=n, k=k, dtype_bytes=dtype_bytes)
    return Workload(flops=2.0 * m * n * k, bytes=float(m * k + k * n + m * n) * dtype_bytes)
    # END SOLUTION


def gemv_workload(n_out: int, n_in: int, dtype_bytes: float, batch: int = 1) -> Workload:
    """y = x @ W.T with W: (n_out, n_in) and x: (batch, n_in) -- a GEMM with m = batch.

    The decode-time linear layer: at batch 1 every weight is read to do 2 FLOPs, so the
    intensity is about 2 / dtype_bytes FLOP/byte.
    """
    # BEGIN SOLUTION
    return gemm_workload(batch, n_out, n_in, dtype_bytes)
    # END SOLUTION


def attention_prefill_workload(
    batch: int,
    n_heads: int,
    seq_len: int,
    head_dim: int,
    dtype_bytes: float,
    *,
    n_kv_heads: int | None = None,
    causal: bool = False,
) -> Workload:
    """Fused attention forward over a whole prompt: O = softmax(Q K^T / sqrt(d)) V.

    Q, O: (batch, n_heads, seq_len, head_dim); K, V: (batch, n_kv_heads, seq_len, head_dim),
    n_kv_heads defaults to n_heads.
    flops = 4 * batch * n_heads * seq_len**2 * head_dim (Q K^T and P V, 2 FLOPs per multiply-add);
    causal halves it (the FlashAttention benchmark convention: only the lower triangle counts).
    bytes = (2 * batch * n_heads + 2 * batch * n_kv_heads) * seq_len * head_dim * dtype_bytes
    (Q read and O written; K and V read once).
    """
    # BEGIN SOLUTION
    kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    _check_positive(batch=batch, n_heads=n_heads, seq_len=seq_len, head_dim=head_dim,
                    dtype_bytes=dtype_bytes, n_kv_heads=kv_heads)
    flops = 4.0 * batch * n_heads * seq_len * seq_len * head_dim
    if causal:
        flops /= 2
    elems = (2 * batch * n_heads + 2 * batch * kv_heads) * seq_len * head_dim
    return Workload(flops=flops, bytes=float(elems) * dtype_bytes)
    # END SOLUTION


def attention_decode_workload(
    batch: int,
    n_heads: int,
    context: int,
    head_dim: int,
    dtype_bytes: float,
    *,
    n_kv_heads: int | None = None,
) -> Workload:
    """Fused attention for one new query token per sequence against `context` cached tokens.

    q, o: (batch, n_heads, 1, head_dim); cached K, V: (batch, n_kv_heads, context, head_dim).
    flops = 4 * batch * n_heads * context * head_dim.
    bytes = (2 * batch * n_kv_heads * context + 2 * batch * n_heads) * head_dim * dtype_bytes
    (the K and V caches read once; q read and o written).
    The intensity is about n_heads / n_kv_heads / (dtype_bytes / 2) FLOP/B whatever the batch:
    4-8 for GQA groups of 4-8 in bf16, far below a GPU's ridge (H100 bf16: ~295), so batching
    does not help. Not a law: k query tokens per sequence (speculative verification) multiply
    it by k, fp8 KV doubles it, and MLA with absorbed weights (128 query heads over one shared
    latent) reaches ~242, near the ridge.
    """
    # BEGIN SOLUTION
    kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    _check_positive(batch=batch, n_heads=n_heads, context=context, head_dim=head_dim,
                    dtype_bytes=dtype_bytes, n_kv_heads=kv_heads)
    flops = 4.0 * batch * n_heads * context * head_dim
    elems = (2 * batch * kv_heads * context + 2 * batch * n_heads) * head_dim
    return Workload(flops=flops, bytes=float(elems) * dtype_bytes)
    # END SOLUTION
