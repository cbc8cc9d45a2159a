"""Sampling is the same on every rank (the same generator state, no exchange of logits), and a bad
input is a clear error on every rank, never a hang: a prompt longer than the cache and an empty
batch, under PP=2 (where a rank left behind would wait forever for its peer); the engine serves a
good request afterwards, so no rank went out of step."""

from __future__ import annotations

import pytest
from conftest import ENGINE, random_prompts
from rank_programs import bad_inputs_on_rank, check_tokens, serve_on_rank

PROMPTS = random_prompts(21, [4, 7])


@pytest.mark.points(4)
@pytest.mark.world_size(2)
def test_tp2_ranks_sample_the_same_tokens_at_temperature_one(ranks, tiny_llama):
    results = ranks.run(serve_on_rank, tiny_llama[0], 2, 1, 1, PROMPTS, 24, False, 1.0)
    check_tokens(results[1:], results[0]["tokens"], "TP=2 sampled at temperature 1 (rank 1 against rank 0)")
    distinct = {t for row in results[0]["tokens"] for t in row}
    assert len(distinct) > 8, f"48 sampled tokens take only {len(distinct)} values: is the run greedy?"


@pytest.mark.points(4)
@pytest.mark.world_size(2)
def test_bad_input_is_a_clear_error_on_every_pp_rank(ranks, tiny_llama, hf_greedy):
    too_long = random_prompts(22, [ENGINE["max_model_len"] + 20])[0]
    good = PROMPTS[0]
    results = ranks.run(bad_inputs_on_rank, tiny_llama[0], 1, 2, too_long, good)
    for rank, res in enumerate(results):
        errors = res["errors"]
        assert errors["too long"] and str(len(too_long)) in errors["too long"], (
            f"rank {rank}: a {len(too_long)}-token prompt with max_model_len {ENGINE['max_model_len']} raised "
            f"{errors['too long']!r}; expected a ValueError naming its length")
        assert errors["empty"] and "empty" in errors["empty"].lower(), (
            f"rank {rank}: an empty batch raised {errors['empty']!r}; expected a ValueError saying the batch is empty")
        assert res["tokens"] == hf_greedy([good], 4)[0], f"rank {rank}: the good request after the errors went wrong"
