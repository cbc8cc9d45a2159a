"""TP=2 x PP=2 on four ranks, 2 micro-batches: greedy tokens identical to HF generate on every rank
(32 steps), exact collective counts, each layer's all-reduces on each rank's timeline, and the
pipeline's order on both tp columns (sends after their compute, the next stage after the send,
micro-batches overlapping across stages), no compute span overlapping a
communication span, and all-gathers recording the bytes this rank put in."""

from __future__ import annotations

import pytest
from conftest import TINY, random_prompts
from rank_programs import (check_counts, check_layer_reduces, check_pipeline_order, check_spans, check_tokens,
                           serve_on_rank)

STEPS = 32
# the last prompt has one token: at step 0 micro-batch 1 holds a one-token entry after a longer one,
# which one process samples first (one-token rows lead), so the micro-batches' logits must be put
# back in that order before sampling
PROMPTS = random_prompts(12, [6, 3, 9, 1])
# the ids on either side of the vocabulary split at TP=2: the last row of rank 0's shard, the first of rank 1's
PROMPTS[2][3:5] = [TINY["vocab_size"] // 2 - 1, TINY["vocab_size"] // 2]


@pytest.mark.points(10)
@pytest.mark.world_size(4)
def test_tp2_pp2_serves_hf_greedy_tokens_with_the_schedule_on_its_timeline(ranks, tiny_llama, hf_greedy):
    results = ranks.run(serve_on_rank, tiny_llama[0], 2, 2, 2, PROMPTS, STEPS, True)
    check_tokens(results, hf_greedy(PROMPTS, STEPS), "TP=2 x PP=2")
    check_counts(results, tp=2, pp=2, m=2, num_prompts=len(PROMPTS), n=STEPS, case="TP=2 x PP=2")
    check_layer_reduces(results, tp=2, pp=2, case="TP=2 x PP=2")
    check_spans(results, tp=2, m=2, num_prompts=len(PROMPTS), vocab=TINY["vocab_size"], case="TP=2 x PP=2")
    overlapped = check_pipeline_order(results, tp=2, m=2, num_prompts=len(PROMPTS), n=STEPS, case="TP=2 x PP=2")
    assert overlapped > 0, f"in none of {STEPS} steps did stage 0 compute micro-batch 1 while stage 1 computed micro-batch 0"
