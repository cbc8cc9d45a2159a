"""TP=4 on the 2-KV-head model: each KV head replicated on two ranks. Greedy tokens identical to HF
generate on every rank (32 steps: a TP=4 step costs ~0.1 s on two cores, 4 ranks sharing them), two
all-reduces a layer and one for the embedding per step, counted and named on each rank's timeline."""

from __future__ import annotations

import pytest
from conftest import random_prompts
from rank_programs import check_counts, check_layer_reduces, check_tokens, serve_on_rank

STEPS = 32
PROMPTS = random_prompts(11, [5, 2, 8])


@pytest.mark.points(8)
@pytest.mark.world_size(4)
def test_tp4_replicates_kv_heads_and_serves_hf_greedy_tokens(ranks, tiny_llama, hf_greedy):
    results = ranks.run(serve_on_rank, tiny_llama[0], 4, 1, 1, PROMPTS, STEPS, True)
    check_tokens(results, hf_greedy(PROMPTS, STEPS), "TP=4")
    check_counts(results, tp=4, pp=1, m=1, num_prompts=len(PROMPTS), n=STEPS, case="TP=4")
    check_layer_reduces(results, tp=4, pp=1, case="TP=4")
