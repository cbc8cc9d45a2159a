"""The analysis of README "Analysis": each number in answers/speculation_numbers.toml against the same
quantity recomputed from the student's own speculative_generate and measure_acceptance on the
course pair with analysis.py's prompt (the course's copy). The paper's formulas are applied here, in
the judge, to the student's alpha: the theory functions are graded by their own tests."""

from __future__ import annotations

import functools

import pytest
from analysis import C_CHEAP, GAMMA, MAX_NEW, PROMPT_LEN, best_gamma, prompt_ids
from conftest import acceptance_in_worker, pair_dirs, spec_runs

from autograder.testing import numeric_answer


def tokens_per_call(alpha: float, gamma: int) -> float:
    return gamma + 1.0 if alpha == 1.0 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


def speedup(alpha: float, gamma: int, c: float) -> float:
    return tokens_per_call(alpha, gamma) / (gamma * c + 1)


@functools.cache
def recomputed() -> dict[str, float]:
    """The student's greedy run and its alpha, once per module (~10 s on one core)."""
    target, draft = pair_dirs()
    prompt = prompt_ids()
    run = spec_runs(target, draft, prompt, MAX_NEW, GAMMA, 0.0, 1.0, [0])[0]
    alpha = float(acceptance_in_worker(target, draft, prompt + run["tokens"], PROMPT_LEN, 0.0, 1.0).mean())
    predicted = tokens_per_call(alpha, GAMMA)
    gamma, best = best_gamma(alpha, C_CHEAP, speedup)
    return {"alpha": alpha, "tokens_per_call_measured": run["tokens_per_call"],
            "tokens_per_call_predicted": predicted, "break_even_c": (predicted - 1) / GAMMA,
            "best_gamma_cheap_draft": gamma, "best_speedup_cheap_draft": best}


@pytest.mark.points(1)
@pytest.mark.parametrize("key", ["alpha", "tokens_per_call_measured", "tokens_per_call_predicted", "break_even_c",
                                 "best_speedup_cheap_draft"])
def test_numeric_answer_matches_your_own_speculation(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "speculation_numbers", key)
    expected = recomputed()[key]
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/speculation_numbers.toml: {key} = {answer}, but your package gives {expected:.5g} "
        f"(alpha = {recomputed()['alpha']:.5g}; python analysis.py prints every value)")


@pytest.mark.points(1)
def test_best_gamma_matches_your_own_alpha(request, tol):
    answer = numeric_answer(request.config.rootpath, "speculation_numbers", "best_gamma_cheap_draft")
    expected = recomputed()["best_gamma_cheap_draft"]
    assert answer == pytest.approx(expected, abs=tol("numeric answer, count")["atol"]), (
        f"answers/speculation_numbers.toml: best_gamma_cheap_draft = {answer}, but with your alpha = "
        f"{recomputed()['alpha']:.5g} the modelled speedup at c = {C_CHEAP} peaks at gamma = {expected}")
