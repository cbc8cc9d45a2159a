"""Tensor parallelism inside the engine: TP=1 through the same code path in one process, and TP=2
on two gloo ranks, greedy tokens identical to HF generate (fp32, 64 steps, 4 prompts served together)
on every rank, and the collectives a step makes counted per rank."""

from __future__ import annotations

import pytest
from autograder.testing import in_worker
from conftest import ENGINE, random_prompts
from rank_programs import check_counts, check_tokens, serve_on_rank
from tpp import ParallelLLM, SamplingParams

STEPS = 64
PROMPTS = random_prompts(1, [3, 7, 5, 9])


@in_worker
def serve_in_one_process(path: str, prompts: list[list[int]], n: int) -> list[list[int]]:
    llm = ParallelLLM(path, tp=1, pp=1, **ENGINE)
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
    return [list(o.outputs[0].token_ids) for o in outs]


@pytest.mark.points(2)
def test_tp1_serves_hf_greedy_tokens_in_one_process(tiny_llama, hf_greedy):
    got = serve_in_one_process(tiny_llama[0], PROMPTS, STEPS)
    check_tokens([dict(rank=0, tokens=got)], hf_greedy(PROMPTS, STEPS), "TP=1, one process")


@pytest.mark.points(8)
@pytest.mark.world_size(2)
def test_tp2_serves_hf_greedy_tokens_on_every_rank_with_two_reduces_a_layer(ranks, tiny_llama, hf_greedy):
    results = ranks.run(serve_on_rank, tiny_llama[0], 2, 1, 1, PROMPTS, STEPS)
    check_tokens(results, hf_greedy(PROMPTS, STEPS), "TP=2")
    check_counts(results, tp=2, pp=1, m=1, num_prompts=len(PROMPTS), n=STEPS, case="TP=2")
