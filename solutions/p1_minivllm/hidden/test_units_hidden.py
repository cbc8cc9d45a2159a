"""Hidden unit tests: sharing and eviction corners of the block manager, preemption order, batch
building across block boundaries, paged attention shapes, sampler corners."""

import pytest
import torch
import torch.nn.functional as F
from autograder.testing import oracle

from minivllm import (AttentionMetadata, BlockManager, EngineConfig, ModelConfig, ModelRunner, SamplingParams,
                      ScheduledSeq, Scheduler, Sequence, paged_attention, sample, sampling_probs)

BS = 4


def seq_of(seq_id, tokens, max_tokens=8):
    return Sequence(seq_id, tokens, SamplingParams(max_tokens=max_tokens), BS)


def computed(bm, seq, n=None):
    seq.num_computed_tokens = seq.num_tokens if n is None else n
    bm.cache_blocks(seq)


@pytest.mark.points(1)
def test_a_shared_block_stays_until_its_last_holder_frees_it(pool_problems):
    bm = BlockManager(8, BS)
    a = seq_of(0, list(range(9)))
    bm.allocate(a)
    computed(bm, a)
    b = seq_of(1, list(range(9)))
    bm.allocate(b)
    shared = a.block_table[:2]
    bm.free(a)
    assert [bm.blocks[i].ref_count for i in shared] == [1, 1]
    assert not set(shared) & set(bm.free_block_ids)
    assert not pool_problems(bm, [b])
    bm.free(b)
    assert bm.num_free_blocks == 8 and not pool_problems(bm, [])


@pytest.mark.points(1)
def test_blocks_of_generated_tokens_are_cached_once_computed():
    bm = BlockManager(8, BS)
    a = seq_of(0, list(range(6)))
    bm.allocate(a)
    computed(bm, a)
    a.append_token(70)
    a.append_token(71)  # tokens 0..5, 70, 71: block 1 is now full
    bm.append_slots(a)
    computed(bm, a)
    b = seq_of(1, a.token_ids + [5])
    bm.allocate(b)
    assert b.num_cached_tokens == 8 and b.block_table[:2] == a.block_table[:2]


@pytest.mark.points(2)
def test_blocks_are_not_cached_before_their_tokens_are_computed():
    bm = BlockManager(8, BS)
    a = seq_of(0, list(range(13)))
    bm.allocate(a)
    computed(bm, a, n=5)  # a chunked prefill has computed 5 of 13 tokens: only block 0 holds K/V
    b = seq_of(1, list(range(13)))
    bm.allocate(b)
    assert b.num_cached_tokens == 4
    assert b.block_table[0] == a.block_table[0] and b.block_table[1] != a.block_table[1]


@pytest.mark.points(1)
def test_reusing_an_evicted_block_leaves_no_stale_cache_entry():
    bm = BlockManager(3, BS)
    a = seq_of(0, list(range(5)))
    bm.allocate(a)
    computed(bm, a)
    bm.free(a)
    filler = seq_of(1, [9] * 12)  # takes all 3 blocks, the cached one included
    bm.allocate(filler)
    for h, block_id in bm.hash_to_block_id.items():
        assert bm.blocks[block_id].hash == h and bm.blocks[block_id].ref_count == 1
    bm.free(filler)
    c = seq_of(2, list(range(5)))
    bm.allocate(c)
    assert c.num_cached_tokens == 0


@pytest.mark.points(2)
def test_several_preemptions_in_one_step_requeue_victims_oldest_first(pool_problems):
    config = EngineConfig(block_size=BS, num_kv_blocks=4, max_num_batched_tokens=64, enable_prefix_caching=False)
    sched = Scheduler(config, BlockManager(4, BS, False), max_model_len=64)
    seqs = [seq_of(i, [10 + i] * 4, max_tokens=10) for i in range(4)]
    for s in seqs:
        sched.add(s)
    first = sched.schedule()
    sched.postprocess(first, [7] * 4)  # all four now hold 5 tokens in 1 block: each needs a second
    second = sched.schedule()
    assert [(s.seq.seq_id, s.num_tokens) for s in second] == [(0, 1), (1, 1)]
    assert list(sched.waiting) == [seqs[2], seqs[3]]
    assert sched.num_preemptions == 2
    sched.postprocess(second, [7, 7])
    assert not pool_problems(sched.block_manager, sched.running, sched.waiting)
    assert all(s.token_ids[4:] == [7] for s in seqs[2:])


@pytest.mark.points(1)
def test_a_sequence_that_preempts_itself_requeues_ahead_of_newer_requests():
    config = EngineConfig(block_size=BS, num_kv_blocks=3, max_num_batched_tokens=64, enable_prefix_caching=False)
    sched = Scheduler(config, BlockManager(3, BS, False), max_model_len=64)
    a, b = seq_of(0, [1] * 4, 10), seq_of(1, [2] * 4, 10)
    sched.add(a)
    sched.add(b)
    sched.postprocess(sched.schedule(), [7, 7])
    c = seq_of(2, [3] * 2, 10)
    sched.add(c)
    plan = sched.schedule()  # a takes the free block; b needs one more: b is preempted
    assert [(s.seq.seq_id, s.num_tokens) for s in plan] == [(0, 1)]
    assert list(sched.waiting) == [b, c]


@pytest.fixture(scope="module")
def runner(tiny_llama):
    path = tiny_llama[0]
    cfg = EngineConfig(block_size=BS, num_kv_blocks=32, device="cpu", dtype="float32")
    return ModelRunner(path, ModelConfig.from_pretrained(path), cfg, max_model_len=256)


@pytest.mark.points(2)
def test_prepare_maps_a_chunk_that_spans_three_blocks(runner):
    seq = Sequence(0, list(range(100, 120)), SamplingParams(), BS, block_table=[11, 4, 30, 8, 2],
                   num_computed_tokens=3)
    batch = runner.prepare([ScheduledSeq(seq, 9)])  # positions 3..11
    expected = [11 * 4 + 3, 4 * 4, 4 * 4 + 1, 4 * 4 + 2, 4 * 4 + 3, 30 * 4, 30 * 4 + 1, 30 * 4 + 2, 30 * 4 + 3]
    assert batch.attn.slot_mapping.tolist() == expected
    assert batch.positions.tolist() == list(range(3, 12))
    assert batch.input_ids.tolist() == list(range(103, 112))
    assert batch.attn.context_lens.tolist() == [12] and batch.logits_indices.tolist() == []


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
