"""Upper bound on decode throughput: every step reads the weights it multiplies with, plus every
sequence's KV cache."""

from __future__ import annotations

from .roofline import Workload
from .specs import DeviceSpec, ModelSpec


def kv_bytes_per_token(model: ModelSpec) -> float:
    """Bytes one token occupies in the KV cache: 2 (K and V) * layers * kv heads * head dim * bytes.

    Example: Llama-3-8B (32 layers, 8 KV heads, head dim 128, bf16) -> 131072 bytes = 128 KiB.
    """
    raise NotImplementedError("s00.1: kv_bytes_per_token")


def params_read_per_step(model: ModelSpec) -> float:
    """Parameters one decode step reads in full from HBM, whatever the batch: the weights it
    multiplies with (2 FLOPs per parameter per token).

    Every parameter counts except the *input* embedding table: looking up a token is a gather of
    one row, so a step reads only `batch` rows of it (batch * hidden elements, ignored here like
    the other activations) and does no arithmetic with it. The LM head (vocab_size x hidden) is a
    matmul over the whole vocabulary: it is read in full every step. With tied embeddings the one
    shared table *is* the LM head's weight, so it is read in full once and every parameter counts.
        untied: n_params - vocab_size * hidden;   tied: n_params.
    Example: Llama-3-8B (8_030_261_248 parameters, vocab 128256, hidden 4096, untied)
    -> 8_030_261_248 - 525_336_576 = 7_504_924_672.
    """
    raise NotImplementedError("s00.2: params_read_per_step")


def decode_step_workload(model: ModelSpec, batch: int, context: int) -> Workload:
    """One decode step producing one token for each of `batch` sequences.

    Each sequence already holds `context` tokens in the KV cache and attends to all of them.
    With P = params_read_per_step(model):
    flops = batch * (2 * P + 4 * n_layers * context * hidden)
            (2 FLOPs per weight multiplied per token, plus Q K^T and P V over the context in every
            layer; the embedding lookup is a gather: no FLOPs);
    bytes = P * dtype_bytes + batch * context * kv_bytes_per_token(model)
            (the weights are read once per step and shared by the batch; each sequence's KV cache
            is read once; the gathered embedding rows, activations and the new token's K/V writes
            are ignored).
    ValueError if batch < 1 or context < 0.
    """
    raise NotImplementedError("s00.3: decode_step_workload")


def decode_tokens_per_s_bound(
    model: ModelSpec, device: DeviceSpec, dtype: str, batch: int, context: int
) -> float:
    """Most tokens/s (summed over the batch) that decode can reach on `device` computing in `dtype`.

    A step cannot be faster than max(step flops / peak, step bytes / bandwidth), and it yields
    `batch` tokens. At small batch the bytes term wins: tokens/s ~ batch * bw / step bytes.
    Example: Llama-3-8B bf16 at batch 1, empty context, on an H200:
    4.8e12 / (7_504_924_672 * 2) = 319.8 tokens/s.
    """
    raise NotImplementedError("s00.4: decode_tokens_per_s_bound")
