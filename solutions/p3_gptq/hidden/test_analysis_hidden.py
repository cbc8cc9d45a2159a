"""The analysis of README "Analysis": each number in answers/gptq_numbers.toml against the same
quantity recomputed here from the student's own rtn, GPTQ and add_batch on the inputs of layer 0's
q_proj and down_proj of the course model (analysis.py, the master copy, not the student's). The
inputs come from transformers' LLaMA in the judge; only the quantizers run in the worker."""

from __future__ import annotations

import pytest
from analysis import layer_inputs, numbers

from autograder.testing import course_model_dir, numeric_answer

pytestmark = pytest.mark.kernels()  # torch code, no Triton kernel
KEYS = [f"{kind}_{name}" for name in ("q_proj", "down_proj")
        for kind in ("rtn_error", "gptq_error", "act_order_error", "diag_spread")]


@pytest.fixture(scope="module")
def recomputed() -> dict[str, float]:
    """The student's numbers, one run of their quantizers for the whole module (~5 s on one core)."""
    folder = course_model_dir()
    if folder is None or not (folder.parents[1] / "eval" / "eval.txt").is_file():
        pytest.skip("datasets/models/course-llama or datasets/eval is not built")
    return numbers(layer_inputs(folder))


@pytest.mark.points(1)
@pytest.mark.parametrize("key", KEYS)
def test_numeric_answer_matches_your_own_quantizers(key, request, tol, recomputed):
    answer = numeric_answer(request.config.rootpath, "gptq_numbers", key)
    expected = recomputed[key]
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/gptq_numbers.toml: {key} = {answer}, but your package gives {expected:.5g} "
        "(python analysis.py prints every value)")
