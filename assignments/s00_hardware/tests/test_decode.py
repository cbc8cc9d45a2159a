"""Decode throughput bound for Llama-3-8B: the weights a step multiplies with plus each sequence's KV
cache. Oracle: parameter counts from transformers' own Llama modules built on the meta device, and
hand arithmetic from the published config."""

import pytest
import torch
from hwnumerics import (
    H200,
    ModelSpec,
    decode_step_workload,
    decode_tokens_per_s_bound,
    kv_bytes_per_token,
    params_read_per_step,
)

# Llama-3-8B config.json: 32 layers, hidden 4096, 32 query heads and 8 KV heads of dim 128,
# MLP 14336, vocab 128256, untied embeddings (embed_tokens and lm_head are separate tensors).
LLAMA3_8B_CONFIG = {"vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 8, "tie_word_embeddings": False}


@pytest.fixture(scope="module")
def llama3_8b_counts():
    """(all parameters, input-embedding parameters) of HF's LlamaForCausalLM for Llama-3-8B."""
    from transformers import LlamaConfig, LlamaForCausalLM

    with torch.device("meta"):  # shapes only, no memory
        model = LlamaForCausalLM(LlamaConfig(**LLAMA3_8B_CONFIG))
    total = sum(p.numel() for p in model.parameters())
    # hand count: V d (embed) + L (2 d H D + 2 d Hkv D + 3 d f + 2 d) + d (final norm) + V d (lm_head)
    v, d, n_layers, f = 128256, 4096, 32, 14336
    assert total == v * d + n_layers * (2 * d * 32 * 128 + 2 * d * 8 * 128 + 3 * d * f + 2 * d) + d + v * d
    assert total == 8_030_261_248
    return total, model.model.embed_tokens.weight.numel()


@pytest.fixture(scope="module")
def llama3_8b(llama3_8b_counts):
    total, _ = llama3_8b_counts
    return ModelSpec("llama-3-8b", n_layers=32, hidden=4096, n_kv_heads=8, head_dim=128, n_params=total,
                     vocab_size=128256, dtype_bytes=2)


@pytest.mark.points(2)
def test_kv_bytes_per_token_of_llama3_8b_is_128_kib(llama3_8b):
    # 2 (K and V) * 32 layers * 8 heads * 128 dims * 2 bytes = 131_072 bytes
    assert kv_bytes_per_token(llama3_8b) == 131_072


@pytest.mark.points(2)
def test_a_decode_step_reads_every_weight_but_the_input_embedding_table(llama3_8b, llama3_8b_counts):
    # The lookup gathers one row per token; the LM head (a separate 128256 x 4096 matrix here) is a
    # matmul over the whole vocabulary and is read in full.
    total, embedding = llama3_8b_counts
    assert params_read_per_step(llama3_8b) == pytest.approx(total - embedding, rel=1e-12)
    assert params_read_per_step(llama3_8b) == pytest.approx(7_504_924_672, rel=1e-12)  # 8.03e9 - 525.3e6


@pytest.mark.points(2)
def test_batch_one_decode_is_bounded_by_weight_bandwidth(llama3_8b):
    # Each token needs 7_504_924_672 * 2 = 15_009_849_344 weight bytes: 4.8e12 / 15.01e9 = 319.8 tok/s
    assert decode_tokens_per_s_bound(llama3_8b, H200, "bf16", batch=1, context=0) == pytest.approx(
        4.8e12 / 15_009_849_344, rel=1e-9)


@pytest.mark.points(2)
def test_decode_step_reads_weights_once_and_each_sequences_kv(llama3_8b):
    w = decode_step_workload(llama3_8b, batch=64, context=4096)
    # bytes = 15_009_849_344 (weights, shared by the batch) + 64 * 4096 * 131_072 (KV) = 49_369_587_712
    assert w.bytes == pytest.approx(15_009_849_344 + 64 * 4096 * 131_072, rel=1e-12)
    # flops = 64 * (2 * 7_504_924_672 + 4 * 32 * 4096 * 4096) = 1_098_069_311_488
    assert w.flops == pytest.approx(64 * (2 * 7_504_924_672 + 4 * 32 * 4096 * 4096), rel=1e-12)
    # memory-bound: 64 tokens per 49.37e9 / 4.8e12 s = 6223 tok/s
    bound = decode_tokens_per_s_bound(llama3_8b, H200, "bf16", batch=64, context=4096)
    assert bound == pytest.approx(64 * 4.8e12 / (15_009_849_344 + 64 * 4096 * 131_072), rel=1e-9)
