"""The analysis of README "Analysis": each number in answers/policy_numbers.toml against the same
quantity recomputed here from the student's own `simulate` on the quick long_prompt trace, under
the continuous and chunked policies of compare.py (the master copy, not the student's)."""

from __future__ import annotations

import functools

import pytest
from compare import MAX_MODEL_LEN, builtin_traces, policies
from kvcache import CostModel, SimConfig, simulate

from autograder.testing import numeric_answer


@functools.cache
def _runs():
    """{policy: SimResult} of the student's simulator, one run per policy for the whole module."""
    trace = builtin_traces(quick=True)["long_prompt"]
    max_model_len = max(MAX_MODEL_LEN, max(r.prompt_len + r.output_len for r in trace))
    configs = policies(max_model_len, budget=512, max_num_seqs=128)
    return {name: simulate(trace, SimConfig(scheduler=configs[name], num_blocks=2048, cost=CostModel()))
            for name in ("continuous", "chunked")}


def prefill_only_share(result):
    total = sum(s.duration_s for s in result.steps)
    return sum(s.duration_s for s in result.steps if s.num_prefill_tokens > 0 and s.num_decode_tokens == 0) / total


def longest_step_ms(result):
    return 1e3 * max(s.duration_s for s in result.steps)


def mean_tpot(result):
    tpots = [r.tpot_s for r in result.requests if r.tpot_s is not None]
    return sum(tpots) / len(tpots)


QUANTITIES = {
    "prefill_only_share_continuous": lambda runs: prefill_only_share(runs["continuous"]),
    "prefill_only_share_chunked": lambda runs: prefill_only_share(runs["chunked"]),
    "longest_step_ms_continuous": lambda runs: longest_step_ms(runs["continuous"]),
    "longest_step_ms_chunked": lambda runs: longest_step_ms(runs["chunked"]),
    "mean_tpot_ratio": lambda runs: mean_tpot(runs["continuous"]) / mean_tpot(runs["chunked"]),
}


@pytest.mark.points(1)
@pytest.mark.parametrize("key", QUANTITIES)
def test_numeric_answer_matches_your_own_simulation(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "policy_numbers", key)
    expected = QUANTITIES[key](_runs())
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/policy_numbers.toml: {key} = {answer}, but your simulator gives {expected:.4g}")


@pytest.mark.points(1)
def test_preemption_count_matches_your_own_simulation(request, tol):
    answer = numeric_answer(request.config.rootpath, "policy_numbers", "preemptions_continuous")
    expected = sum(r.num_preemptions for r in _runs()["continuous"].requests)
    assert answer == pytest.approx(expected, abs=tol("numeric answer, count")["atol"]), (
        f"answers/policy_numbers.toml: preemptions_continuous = {answer}, but your simulator gives {expected}")
