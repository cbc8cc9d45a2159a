"""Decode throughput bound: weights + KV cache bytes per step, hand-computed for Llama-3-8B."""

import pytest

from hwnumerics import H200, ModelSpec, decode_step_workload, decode_tokens_per_s_bound, kv_bytes_per_token

# Llama-3-8B shapes: 32 layers, hidden 4096, 8 KV heads of dim 128, 8.03e9 parameters, bf16.
LLAMA3_8B = ModelSpec("llama-3-8b", n_layers=32, hidden=4096, n_kv_heads=8, head_dim=128,
                      n_params=8.03e9, dtype_bytes=2)


@pytest.mark.points(2)
def test_kv_bytes_per_token_of_llama3_8b_is_128_kib():
    # 2 (K and V) * 32 layers * 8 heads * 128 dims * 2 bytes = 131_072 bytes
    assert kv_bytes_per_token(LLAMA3_8B) == 131_072


@pytest.mark.points(2)
def test_batch_one_decode_is_bounded_by_weight_bandwidth():
    # Each token needs all 8.03e9 * 2 = 16.06e9 weight bytes: 4.8e12 / 16.06e9 = 298.9 tok/s
    assert decode_tokens_per_s_bound(LLAMA3_8B, H200, "bf16", batch=1, context=0) == pytest.approx(
        4.8e12 / 16.06e9, rel=1e-9)


@pytest.mark.points(2)
def test_decode_step_reads_weights_once_and_each_sequences_kv():
    w = decode_step_workload(LLAMA3_8B, batch=64, context=4096)
    # bytes = 16.06e9 (weights, shared by the batch) + 64 * 4096 * 131_072 (KV) = 50_419_738_368
    assert w.bytes == pytest.approx(16.06e9 + 64 * 4096 * 131_072, rel=1e-12)
    # flops = 64 * (2 * 8.03e9 + 4 * 32 * 4096 * 4096) = 1_165_278_953_472
    assert w.flops == pytest.approx(64 * (2 * 8.03e9 + 4 * 32 * 4096 * 4096), rel=1e-12)
    # memory-bound: 64 tokens per 50.42e9 / 4.8e12 s = 6093 tok/s
    bound = decode_tokens_per_s_bound(LLAMA3_8B, H200, "bf16", batch=64, context=4096)
    assert bound == pytest.approx(64 * 4.8e12 / 50_419_738_368, rel=1e-9)
