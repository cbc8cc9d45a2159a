"""Hidden: decode bounds -- tied vs untied embeddings (oracle: transformers' modules on the meta
device), compute-bound huge batches, attention FLOPs over the context, fp8 KV, int4 weights."""

import pytest
import torch
from hwnumerics import (
    H100_SXM,
    H200,
    ModelSpec,
    decode_step_workload,
    decode_tokens_per_s_bound,
    kv_bytes_per_token,
    params_read_per_step,
)

# Qwen2.5-0.5B config.json: vocab 151936, hidden 896, MLP 4864, 24 layers, 14 query / 2 KV heads of
# dim 64, q/k/v biases, tied embeddings: lm_head *is* embed_tokens (28% of all parameters).
QWEN25_05B = {"vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
              "num_attention_heads": 14, "num_key_value_heads": 2, "tie_word_embeddings": True}


def hf_counts(config_cls, model_cls, fields):
    """(all parameters, a shared tensor counted once; input-embedding parameters; head tied?)"""
    with torch.device("meta"):  # shapes only
        model = model_cls(config_cls(**fields))
    embed = model.model.embed_tokens.weight
    return sum(p.numel() for p in model.parameters()), embed.numel(), model.lm_head.weight is embed


@pytest.fixture(scope="module")
def qwen():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    total, embedding, tied = hf_counts(Qwen2Config, Qwen2ForCausalLM, QWEN25_05B)
    assert tied and total == 494_032_768 and embedding == 151936 * 896  # 136_134_656
    spec = ModelSpec("qwen2.5-0.5b", n_layers=24, hidden=896, n_kv_heads=2, head_dim=64, n_params=total,
                     vocab_size=151936, dtype_bytes=2, tied_embeddings=True)
    return spec, total


@pytest.mark.points(2)
def test_a_tied_table_is_read_in_full_once_by_the_lm_head(qwen):
    # The lookup gathers rows of the shared table, but the LM head multiplies with all of it: every
    # parameter is read (once), none is skipped.
    spec, total = qwen
    assert params_read_per_step(spec) == pytest.approx(total, rel=1e-12)
    w = decode_step_workload(spec, batch=1, context=0)
    assert w.bytes == pytest.approx(2 * 494_032_768, rel=1e-12)
    assert w.flops == pytest.approx(2 * 494_032_768, rel=1e-12)
    # 4.8e12 / 988_065_536 = 4858 tok/s
    assert decode_tokens_per_s_bound(spec, H200, "bf16", batch=1, context=0) == pytest.approx(
        4.8e12 / 988_065_536, rel=1e-9)


@pytest.mark.points(1)
def test_untying_the_same_model_adds_a_head_but_no_read_of_the_input_table(qwen):
    # Same shapes untied: one more 151936 x 896 table (the input one), which a step only gathers,
    # so the bytes a step reads do not change.
    spec, total = qwen
    untied = ModelSpec("qwen2.5-0.5b-untied", n_layers=24, hidden=896, n_kv_heads=2, head_dim=64,
                       n_params=total + 151936 * 896, vocab_size=151936, dtype_bytes=2)
    assert params_read_per_step(untied) == pytest.approx(total, rel=1e-12)
    assert decode_step_workload(untied, batch=3, context=7).bytes == pytest.approx(
        decode_step_workload(spec, batch=3, context=7).bytes, rel=1e-12)


TINY = ModelSpec("tiny-1b", n_layers=16, hidden=2048, n_kv_heads=8, head_dim=64, n_params=1e9,
                 vocab_size=32000, dtype_bytes=2)
TINY_READ = 1e9 - 32000 * 2048  # 934_464_000 parameters read per step


@pytest.mark.points(2)
def test_huge_batch_decode_becomes_compute_bound():
    # batch 4096, empty context: flops = 4096 * 2 * 934_464_000 = 7.655e12 -> 7.74 ms at 989e12
    # FLOP/s; bytes = 1.869e9 -> 0.39 ms at 4.8e12 B/s. Compute wins:
    # tokens/s = 989e12 / (2 * 934_464_000) = 529_180
    assert decode_tokens_per_s_bound(TINY, H200, "bf16", batch=4096, context=0) == pytest.approx(
        989e12 / (2 * TINY_READ), rel=1e-9)


@pytest.mark.points(1)
def test_decode_attention_flops_use_hidden_and_context():
    w = decode_step_workload(TINY, batch=2, context=1000)
    # 2 * (2 * 934_464_000 + 4 * 16 layers * 1000 * 2048)
    assert w.flops == pytest.approx(2 * (2 * TINY_READ + 4 * 16 * 1000 * 2048), rel=1e-12)
    # 2 * 934_464_000 weight bytes + 2 * 1000 * (2 * 16 * 8 * 64 * 2 = 32_768) KV bytes
    assert w.bytes == pytest.approx(2 * TINY_READ + 2 * 1000 * 32_768, rel=1e-12)


@pytest.mark.points(1)
def test_fp8_kv_cache_halves_kv_bytes_and_int4_weights_quarter_weight_bytes():
    m = ModelSpec("q", n_layers=32, hidden=4096, n_kv_heads=8, head_dim=128, n_params=8e9, vocab_size=128256,
                  dtype_bytes=0.5, kv_dtype_bytes=1)
    assert kv_bytes_per_token(m) == 65_536  # 2 * 32 * 8 * 128 * 1
    # (8e9 - 128256 * 4096) * 0.5 weight bytes + 10 * 65_536 KV bytes
    assert decode_step_workload(m, batch=1, context=10).bytes == pytest.approx(
        (8e9 - 128256 * 4096) * 0.5 + 10 * 65_536, rel=1e-12)


@pytest.mark.points(1)
def test_decode_bound_on_h100_uses_its_bandwidth():
    # memory-bound at batch 8, context 2048: (2 * 934_464_000 + 8 * 2048 * 32_768) bytes at 3.35e12
    step_bytes = 2 * TINY_READ + 8 * 2048 * 32_768
    assert decode_tokens_per_s_bound(TINY, H100_SXM, "bf16", batch=8, context=2048) == pytest.approx(
        8 * 3.35e12 / step_bytes, rel=1e-9)


@pytest.mark.points(1)
def test_decode_rejects_bad_batch_or_context():
    assert decode_step_workload(TINY, batch=1, context=0).bytes == pytest.approx(2 * TINY_READ, rel=1e-12)
    with pytest.raises(ValueError):
        decode_step_workload(TINY, batch=0, context=10)
    with pytest.raises(ValueError):
        decode_step_workload(TINY, batch=1, context=-1)
