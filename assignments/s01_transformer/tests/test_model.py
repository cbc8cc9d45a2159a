"""The whole model against `transformers.LlamaForCausalLM` with the same random weights.

Every test builds a tiny HF model (fp32, CPU, eager attention, seeded weights), saves it as an HF
folder (config.json + model.safetensors), loads that folder with `load_model`, and compares.
Tolerance for logits: atol = rtol = 1e-4 (fp32; logits are O(1)).
"""

from __future__ import annotations

import pytest
import torch

from transformer import KVCache, generate, load_model

ATOL = RTOL = 1e-4


def random_ids(batch: int, length: int, vocab: int = 128, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.points(2)
def test_prefill_logits_match_hf(make_hf_llama, hf_logits):
    hf, folder = make_hf_llama(seed=0)
    model = load_model(folder)
    ids = random_ids(2, 11)
    with torch.no_grad():
        logits = model(ids)
    assert logits.shape == (2, 11, 128)
    torch.testing.assert_close(logits, hf_logits(hf, ids), atol=ATOL, rtol=RTOL)


@pytest.mark.points(2)
def test_every_cached_decode_step_matches_hf(make_hf_llama, hf_logits):
    hf, folder = make_hf_llama(seed=1)
    model = load_model(folder)
    ids = random_ids(2, 16, seed=1)
    prompt_len = 7
    cache = model.new_cache(batch_size=2, max_len=16)
    with torch.no_grad():
        logits = model(ids[:, :prompt_len], cache=cache)
        assert cache.length == prompt_len
        torch.testing.assert_close(logits, hf_logits(hf, ids[:, :prompt_len]), atol=ATOL, rtol=RTOL)
        for t in range(prompt_len, 16):  # feed one known token per step
            step = model(ids[:, t : t + 1], cache=cache)
            assert step.shape == (2, 1, 128) and cache.length == t + 1
            oracle = hf_logits(hf, ids[:, : t + 1])[:, -1:]  # HF recomputes the whole prefix
            torch.testing.assert_close(step, oracle, atol=ATOL, rtol=RTOL, msg=f"decode step at position {t}")


@pytest.mark.points(2)
def test_cached_decoding_equals_full_recomputation(make_hf_llama):
    _, folder = make_hf_llama(seed=2)
    model = load_model(folder)
    ids = random_ids(1, 12, seed=2)
    cache = model.new_cache(batch_size=1, max_len=12)
    with torch.no_grad():
        full = model(ids)  # no cache: every position at once
        cached = [model(ids[:, :5], cache=cache)] + [model(ids[:, t : t + 1], cache=cache) for t in range(5, 12)]
    # Same code, different shapes: fp32 rounding only (atol 1e-5).
    torch.testing.assert_close(torch.cat(cached, dim=1), full, atol=1e-5, rtol=1e-5)
    assert torch.equal(
        generate(model, ids[:, :4], max_new_tokens=10, use_cache=True),
        generate(model, ids[:, :4], max_new_tokens=10, use_cache=False),
    )


@pytest.mark.points(2)
def test_greedy_generate_matches_hf_generate(make_hf_llama, hf_greedy):
    hf, folder = make_hf_llama(seed=3)
    model = load_model(folder)
    ids = random_ids(2, 6, seed=3)
    out = generate(model, ids, max_new_tokens=20)
    assert out.shape == (2, 26)
    assert out.tolist() == hf_greedy(hf, ids, 20).tolist()


@pytest.mark.points(1)
def test_kv_cache_update_appends_after_the_filled_slots():
    from transformer import LlamaConfig

    cfg = LlamaConfig(
        vocab_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8,
    )  # fmt: skip
    cache = KVCache.allocate(cfg, batch_size=3, max_len=10, dtype=torch.float32, device="cpu")
    gen = torch.Generator().manual_seed(4)
    chunks = [(torch.randn(3, 2, n, 8, generator=gen), torch.randn(3, 2, n, 8, generator=gen)) for n in (4, 1, 2)]
    for i, (k_new, v_new) in enumerate(chunks):
        k_other = torch.randn(3, 2, k_new.shape[2], 8, generator=gen)
        k, v = cache.update(1, k_new, v_new)
        cache.update(0, k_other, k_other)  # another layer must not disturb layer 1
        cache.advance(k_new.shape[2])
        assert torch.equal(k, torch.cat([c[0] for c in chunks[: i + 1]], dim=2))
        assert torch.equal(v, torch.cat([c[1] for c in chunks[: i + 1]], dim=2))
    assert cache.length == 7
