"""Hidden unit tests: batch building across block boundaries and from a batch with no sampling
entry, paged attention shapes, sampler corners. (The block manager and the scheduler are stage 5's:
graded there.)"""

import pytest
import torch
import torch.nn.functional as F
from autograder.testing import oracle

from minivllm import (AttentionMetadata, Batch, BatchEntry, EngineConfig, ModelConfig, ModelRunner, SamplingParams,
                      paged_attention, sample, sampling_probs)

BS = 4


def entry(seq_id, token_ids, start, n, table, samples):
    """A stage 5 BatchEntry computing positions start .. start + n - 1 of token_ids."""
    slots = tuple(table[p // BS] * BS + p % BS for p in range(start, start + n))
    return BatchEntry(seq_id=seq_id, start_pos=start, num_tokens=n, is_prefill=True, samples=samples,
                      token_ids=tuple(token_ids[start:start + n]), block_table=tuple(table), slot_mapping=slots)


@pytest.fixture(scope="module")
def runner(tiny_llama):
    path = tiny_llama[0]
    cfg = EngineConfig(block_size=BS, num_kv_blocks=32, device="cpu", dtype="float32")
    return ModelRunner(path, ModelConfig.from_pretrained(path), cfg, max_model_len=256)


@pytest.mark.points(2)
def test_prepare_maps_a_chunk_that_spans_three_blocks(runner):
    chunk = entry(4, list(range(100, 120)), 3, 9, [11, 4, 30, 8, 2], samples=False)  # positions 3..11
    inp = runner.prepare(Batch(step=1, entries=(chunk,)))
    expected = [11 * 4 + 3, 4 * 4, 4 * 4 + 1, 4 * 4 + 2, 4 * 4 + 3, 30 * 4, 30 * 4 + 1, 30 * 4 + 2, 30 * 4 + 3]
    assert inp.attn.slot_mapping.tolist() == expected
    assert inp.positions.tolist() == list(range(3, 12))
    assert inp.input_ids.tolist() == list(range(103, 112))
    assert inp.attn.block_tables.tolist() == [[11, 4, 30, 8, 2]]
    assert inp.attn.context_lens.tolist() == [12] and inp.attn.query_start_loc.tolist() == [0, 9]
    assert inp.logits_indices.tolist() == [] and inp.sample_seq_ids == []


@pytest.mark.points(1)
def test_prepare_samples_by_the_entries_flag_and_keeps_batch_order_within_groups(runner):
    # two chunks of 2 and 3 tokens (the first does not sample), then two one-token entries
    a = entry(10, list(range(20, 30)), 5, 2, [1, 2, 3], samples=False)
    b = entry(11, list(range(40, 43)), 0, 3, [6], samples=True)
    c = entry(12, list(range(60, 69)), 8, 1, [7, 9, 5], samples=True)
    d = entry(13, list(range(70, 77)), 6, 1, [8, 0], samples=True)
    inp = runner.prepare(Batch(step=2, entries=(a, b, c, d)))
    assert inp.input_ids.tolist() == [68, 76, 25, 26, 40, 41, 42]
    assert inp.attn.query_start_loc.tolist() == [0, 1, 2, 4, 7]
    assert inp.attn.context_lens_cpu == [9, 7, 7, 3]
    assert inp.logits_indices.tolist() == [0, 1, 6] and inp.sample_seq_ids == [12, 13, 11]


def sdpa_oracle(q, k, v, scale):
    n, length, group = q.shape[0], k.shape[0], q.shape[1] // k.shape[1]
    mask = torch.arange(length)[None, :] <= torch.arange(length - n, length)[:, None]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    with oracle():
        return F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                              attn_mask=mask, scale=scale).transpose(0, 1)


@pytest.mark.points(2)
@pytest.mark.parametrize("block_size,heads,kv_heads", [(1, 2, 2), (16, 8, 2)])
def test_paged_attention_handles_block_sizes_and_head_groups(block_size, heads, kv_heads):
    g = torch.Generator().manual_seed(block_size)
    contexts, new = [37, 2, 20], [3, 1, 20]
    blocks = [-(-c // block_size) for c in contexts]
    perm = torch.randperm(sum(blocks) + 3, generator=g).tolist()
    k_cache = torch.randn(len(perm), block_size, kv_heads, 8, generator=g)
    v_cache = torch.randn(len(perm), block_size, kv_heads, 8, generator=g)
    tables, ks, vs, width = [], [], [], max(blocks)
    for c, nb in zip(contexts, blocks):
        t = [perm.pop() for _ in range(nb)]
        tables.append(t + [0] * (width - nb))
        ks.append(k_cache[t].flatten(0, 1)[:c])
        vs.append(v_cache[t].flatten(0, 1)[:c])
    q = torch.randn(sum(new), heads, 8, generator=g)
    starts = [0, 3, 4, 24]
    meta = AttentionMetadata(torch.zeros(sum(new), dtype=torch.long), torch.tensor(starts, dtype=torch.int32),
                             torch.tensor(contexts, dtype=torch.int32), torch.tensor(tables, dtype=torch.int32),
                             new, contexts)
    out = paged_attention(q, k_cache, v_cache, meta, scale=8 ** -0.5)
    for b in range(3):
        rows = slice(starts[b], starts[b + 1])
        torch.testing.assert_close(out[rows], sdpa_oracle(q[rows], ks[b], vs[b], 8 ** -0.5), atol=1e-5, rtol=1e-5)


@pytest.mark.points(1)
def test_greedy_and_sampled_rows_mix_in_one_batch():
    g = torch.Generator().manual_seed(8)
    logits = torch.randn(4, 20, generator=g)
    params = [SamplingParams(temperature=0), SamplingParams(temperature=1.0, top_k=1),
              SamplingParams(temperature=0), SamplingParams(temperature=0.5, top_p=1e-6)]
    gens = [None, torch.Generator().manual_seed(1), None, torch.Generator().manual_seed(2)]
    assert sample(logits, params, gens) == logits.argmax(-1).tolist()  # top_k=1 / tiny top_p: the mode


@pytest.mark.points(1)
def test_top_p_keeps_the_token_that_crosses_the_threshold():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    probs = sampling_probs(logits, [SamplingParams(temperature=1.0, top_p=0.7)])
    # 0.5 < 0.7, so the 0.3 token is kept too; 0.8 >= 0.7 drops the rest
    torch.testing.assert_close(probs[0], torch.tensor([0.625, 0.375, 0.0, 0.0]), atol=1e-6, rtol=0)
