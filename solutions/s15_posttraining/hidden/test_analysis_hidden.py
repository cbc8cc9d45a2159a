"""The analysis of README "Analysis": each number in answers/length_bias_numbers.toml against the same
quantity recomputed from the student's own grpo_loss and group_advantages on analysis.py's batch
(the course's copy)."""

from __future__ import annotations

import functools

import pytest
from analysis import numbers
from conftest import grpo_run

from autograder.testing import numeric_answer
from posttrain import group_advantages


@functools.cache
def recomputed() -> dict[str, float]:
    return numbers(grpo_run, group_advantages)


@pytest.mark.points(1)
@pytest.mark.parametrize("key", ["advantage_correct", "advantage_wrong", "weight_ratio_grpo", "weight_ratio_bnpo",
                                 "weight_ratio_dr_grpo", "loss_bnpo_whole", "loss_bnpo_accumulated",
                                 "loss_dapo_accumulated"])
def test_numeric_answer_matches_your_own_package(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "length_bias_numbers", key)
    expected = recomputed()[key]
    t = tol("numeric answer")
    assert answer == pytest.approx(expected, rel=t["rtol"], abs=t["atol"]), (
        f"answers/length_bias_numbers.toml: {key} = {answer}, but your package gives {expected:.6g} "
        f"(python analysis.py prints every value)")
