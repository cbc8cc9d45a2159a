"""The analysis of README "Analysis": each number in answers/longctx_numbers.toml against the same
quantity recomputed here from the student's own package with the settings of analysis.py (the
grader's own copy)."""

from __future__ import annotations

import pytest
from analysis import causal_imbalance, collapsed_switch_loss, llama3_counts, ntk_base_at_4x, yarn_counts

from autograder.testing import numeric_answer

QUANTITIES = {
    "ntk_base_4x": ntk_base_at_4x,
    "yarn_attention_factor": lambda: yarn_counts()["attention_factor"],
    "contiguous_imbalance": lambda: causal_imbalance("contiguous"),
    "zigzag_imbalance": lambda: causal_imbalance("zigzag"),
    "collapsed_switch_loss": collapsed_switch_loss,
}
COUNTS = {
    "yarn_kept_pairs": lambda: yarn_counts()["kept"],
    "yarn_divided_pairs": lambda: yarn_counts()["divided"],
    "llama3_kept_pairs": lambda: llama3_counts()["kept"],
    "llama3_divided_pairs": lambda: llama3_counts()["divided"],
}


@pytest.mark.points(1)
@pytest.mark.parametrize("key", sorted(QUANTITIES))
def test_numeric_answer_matches_your_code(key, request, tol):
    got = numeric_answer(request.config.rootpath, "longctx_numbers", key)
    want = QUANTITIES[key]()
    assert got == pytest.approx(want, rel=tol("numeric answer")["rtol"]), f"{key}: you wrote {got}, your code gives {want:.5g}"


@pytest.mark.points(1)
@pytest.mark.parametrize("key", sorted(COUNTS))
def test_numeric_count_matches_your_code(key, request, tol):
    got = numeric_answer(request.config.rootpath, "longctx_numbers", key)
    want = COUNTS[key]()
    assert abs(got - want) <= tol("numeric answer, count")["atol"], f"{key}: you wrote {got}, your code gives {want}"
