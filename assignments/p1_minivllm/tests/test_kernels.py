"""The model runner's pieces: writing K/V through the slot mapping, paged attention, building a
batch, and the sampler. Oracles: torch SDPA on contiguous K/V, exact probabilities computed here."""

import pytest
import torch
import torch.nn.functional as F
from autograder.testing import in_worker, oracle

from minivllm import (AttentionMetadata, Batch, BatchEntry, EngineConfig, ModelConfig, ModelRunner, SamplingParams,
                      paged_attention, sample, sampling_probs, store_kvcache)


def scattered_cache(contexts, num_blocks, block_size, kv_heads, dim, seed):
    """Random K/V for each context, stored in a shuffled set of blocks; returns caches, tables, contiguous K/V."""
    g = torch.Generator().manual_seed(seed)
    k_cache = torch.randn(num_blocks, block_size, kv_heads, dim, generator=g)  # garbage in unused slots
    v_cache = torch.randn(num_blocks, block_size, kv_heads, dim, generator=g)
    free = torch.randperm(num_blocks, generator=g).tolist()
    tables, ks, vs = [], [], []
    for n in contexts:
        table = [free.pop() for _ in range(-(-n // block_size))]
        k = torch.randn(n, kv_heads, dim, generator=g)
        v = torch.randn(n, kv_heads, dim, generator=g)
        for p in range(n):
            k_cache[table[p // block_size], p % block_size] = k[p]
            v_cache[table[p // block_size], p % block_size] = v[p]
        tables.append(table)
        ks.append(k)
        vs.append(v)
    width = max(len(t) for t in tables)
    block_tables = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32)
    return k_cache, v_cache, block_tables, ks, vs


def sdpa_oracle(q, k, v, scale):
    """q (n, H, D) are the last n positions of a context k, v (L, Hkv, D); causal with offset L - n."""
    n, length, group = q.shape[0], k.shape[0], q.shape[1] // k.shape[1]
    mask = torch.arange(length)[None, :] <= torch.arange(length - n, length)[:, None]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    with oracle():
        out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                             attn_mask=mask, scale=scale)
    return out.transpose(0, 1)


@pytest.mark.points(1)
def test_store_kvcache_writes_each_row_to_its_slot():
    g = torch.Generator().manual_seed(0)
    k_cache, v_cache = torch.zeros(6, 4, 2, 8), torch.zeros(6, 4, 2, 8)
    slots = torch.tensor([5, 17, 0, 23, 9])
    k, v = torch.randn(5, 2, 8, generator=g), torch.randn(5, 2, 8, generator=g)
    store_kvcache(k, v, k_cache, v_cache, slots)
    for row, slot in enumerate(slots.tolist()):
        assert torch.equal(k_cache[slot // 4, slot % 4], k[row])
        assert torch.equal(v_cache[slot // 4, slot % 4], v[row])
    assert int((k_cache.flatten(0, 1).abs().sum((1, 2)) > 0).sum()) == 5  # nothing else written


@pytest.mark.points(3)
@pytest.mark.parametrize("block_size", [4, 8])
def test_paged_attention_matches_sdpa_on_a_mixed_batch(block_size):
    # decode (1 new token), full prefill, chunk after a prefix, another decode, GQA 4 heads over 2
    contexts, new = [9, 6, 13, 1], [1, 6, 5, 1]
    k_cache, v_cache, tables, ks, vs = scattered_cache(contexts, 24, block_size, 2, 16, seed=block_size)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(sum(new), 4, 16, generator=g)
    starts = torch.tensor([0, *torch.tensor(new).cumsum(0).tolist()], dtype=torch.int32)
    meta = AttentionMetadata(slot_mapping=torch.zeros(sum(new), dtype=torch.long), query_start_loc=starts,
                             context_lens=torch.tensor(contexts, dtype=torch.int32), block_tables=tables,
                             query_lens_cpu=new, context_lens_cpu=contexts)
    out = paged_attention(q, k_cache, v_cache, meta, scale=0.25)
    assert out.shape == q.shape
    for b in range(len(contexts)):
        rows = slice(int(starts[b]), int(starts[b + 1]))
        expected = sdpa_oracle(q[rows], ks[b], vs[b], 0.25)
        torch.testing.assert_close(out[rows], expected, atol=1e-5, rtol=1e-5)  # fp32, same math


@pytest.fixture(scope="module")
def runner(tiny_llama):
    path = tiny_llama[0]
    cfg = EngineConfig(block_size=4, num_kv_blocks=32, device="cpu", dtype="float32")
    return ModelRunner(path, ModelConfig.from_pretrained(path), cfg, max_model_len=256)


def entry(seq_id, token_ids, start, n, table, block_size=4):
    """The BatchEntry of a sequence (all its token_ids) computing positions start .. start + n - 1
    (stage 5's scheduler makes these); it samples when the chunk reaches the last token. is_prefill
    is a guess here (it needs the prompt length): prepare does not read it."""
    slots = tuple(table[p // block_size] * block_size + p % block_size for p in range(start, start + n))
    return BatchEntry(seq_id=seq_id, start_pos=start, num_tokens=n, is_prefill=start + n < len(token_ids) or n > 1,
                      samples=start + n == len(token_ids), token_ids=tuple(token_ids[start:start + n]),
                      block_table=tuple(table), slot_mapping=slots)


@pytest.mark.points(3)
def test_prepare_builds_positions_slots_and_block_tables(runner):
    decode = entry(7, list(range(10, 20)), 9, 1, [7, 3, 12])
    chunk = entry(3, list(range(30, 43)), 6, 4, [5, 9, 1, 20])
    prefill = entry(5, [4, 5, 6], 0, 3, [2])
    inp = runner.prepare(Batch(step=0, entries=(decode, chunk, prefill)))
    assert inp.input_ids.tolist() == [19, 36, 37, 38, 39, 4, 5, 6]
    assert inp.positions.tolist() == [9, 6, 7, 8, 9, 0, 1, 2]
    # each entry's slots, in row order
    assert inp.attn.slot_mapping.tolist() == [12 * 4 + 1, 9 * 4 + 2, 9 * 4 + 3, 1 * 4 + 0, 1 * 4 + 1,
                                              2 * 4 + 0, 2 * 4 + 1, 2 * 4 + 2]
    assert inp.attn.query_start_loc.tolist() == [0, 1, 5, 8]
    assert inp.attn.context_lens.tolist() == [10, 10, 3]
    assert inp.attn.block_tables.tolist() == [[7, 3, 12, 0], [5, 9, 1, 20], [2, 0, 0, 0]]
    assert inp.attn.query_lens_cpu == [1, 4, 3] and inp.attn.context_lens_cpu == [10, 10, 3]
    # the chunk stops at token 10 of 13: it does not sample
    assert inp.logits_indices.tolist() == [0, 7] and inp.sample_seq_ids == [7, 5]


@pytest.mark.points(2)
def test_prepare_puts_one_token_entries_first(runner):
    prefill = entry(0, list(range(50, 56)), 0, 6, [4, 6])
    chunk = entry(1, list(range(60, 70)), 2, 1, [8, 2, 3])  # a one-token chunk: it does not sample
    decode = entry(2, list(range(80, 85)), 4, 1, [9, 1])
    one_token_prompt = entry(3, [90], 0, 1, [5])
    inp = runner.prepare(Batch(step=3, entries=(prefill, chunk, decode, one_token_prompt)))
    assert inp.input_ids.tolist() == [62, 84, 90, 50, 51, 52, 53, 54, 55]
    assert inp.positions.tolist() == [2, 4, 0, 0, 1, 2, 3, 4, 5]
    assert inp.attn.query_lens_cpu == [1, 1, 1, 6] and inp.attn.num_decodes == 3
    assert inp.attn.context_lens.tolist() == [3, 5, 1, 6]
    assert inp.attn.block_tables.tolist() == [[8, 2, 3], [9, 1, 0], [5, 0, 0], [4, 6, 0]]
    assert inp.attn.slot_mapping.tolist() == [8 * 4 + 2, 1 * 4 + 0, 5 * 4, 16, 17, 18, 19, 24, 25]
    # rows 1 (decode), 2 (the one-token prompt) and 8 (the prefill's last token) sample, by seq_id
    assert inp.logits_indices.tolist() == [1, 2, 8] and inp.sample_seq_ids == [2, 3, 0]


@pytest.mark.points(1)
def test_greedy_rows_take_the_argmax():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(4, 50, generator=g)
    params = [SamplingParams(temperature=0)] * 4
    assert sample(logits, params, [None] * 4) == logits.argmax(-1).tolist()


def probs_oracle(logits, temperature, top_k, top_p):
    """Token-by-token reference of temperature, then top-k (ties kept), then top-p on what is left."""
    z = logits / temperature
    if top_k > 0:
        kth = z.sort(descending=True).values[top_k - 1]
        z = torch.where(z >= kth, z, torch.tensor(float("-inf")))
    p = z.softmax(-1)
    order = p.argsort(descending=True).tolist()
    keep, mass = [], 0.0
    for i in order:
        if mass < top_p:
            keep.append(i)
        mass += float(p[i])
    out = torch.zeros_like(p)
    out[keep] = p[keep] / p[keep].sum()
    return out


@pytest.mark.points(2)
@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, -1, 1.0), (0.7, 5, 1.0), (1.3, -1, 0.6),
                                                     (0.9, 8, 0.75)])
def test_sampling_probs_match_temperature_top_k_top_p(temperature, top_k, top_p):
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(3, 40, generator=g) * 2
    params = [SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p)] * 3
    probs = sampling_probs(logits, params)
    for row in range(3):
        expected = probs_oracle(logits[row], temperature, top_k, top_p)
        torch.testing.assert_close(probs[row], expected, atol=1e-6, rtol=1e-5)


@in_worker
def draws_with_one_generator(logits, n, seed, **params):
    """In the worker: `sample` of `n` copies of the row `logits`, every row drawing from one shared
    generator (a generator crosses by state: a judge list [gen] * n would arrive as n equal copies)."""
    gen = torch.Generator().manual_seed(seed)
    return sample(logits.expand(n, logits.shape[-1]), [SamplingParams(**params)] * n, [gen] * n)


@pytest.mark.points(1)
def test_sampled_tokens_follow_the_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    n = 2000
    tokens = draws_with_one_generator(logits, n, 5, temperature=1.0, top_k=4)
    counts = torch.bincount(torch.tensor(tokens), minlength=6).float()
    expected = probs_oracle(logits[0], 1.0, 4, 1.0)
    assert counts[4:].sum() == 0, "tokens outside the top-k were drawn"
    # total variation of 2000 draws over 4 outcomes: about 0.015 expected, 0.05 is > 4 sigma
    assert 0.5 * (counts / counts.sum() - expected).abs().sum() < 0.05


@pytest.mark.points(1)
def test_a_seeded_row_does_not_depend_on_the_other_rows():
    g = torch.Generator().manual_seed(6)
    logits = torch.randn(3, 30, generator=g)
    params = [SamplingParams(temperature=1.0, seed=1)] * 3

    def draws(rows):
        gens = [torch.Generator().manual_seed(11 + r) for r in rows]
        return [sample(logits[rows], params[: len(rows)], gens) for _ in range(10)]

    alone = [d[0] for d in draws([2])]
    together = [d[2] for d in draws([0, 1, 2])]
    assert alone == together
    assert len(set(alone)) > 1  # it really samples
