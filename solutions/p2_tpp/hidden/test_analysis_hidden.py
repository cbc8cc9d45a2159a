"""The analysis of README "Analysis": each number in answers/deployment_plan.toml against the same
quantity recomputed from the student's own plan_deployment (the handout's inputs, default Hardware)."""

from __future__ import annotations

import functools

import pytest
from conftest import load_config, needs_configs
from tpp import plan_deployment

from autograder.testing import numeric_answer


@functools.cache
def recomputed() -> dict[str, float]:
    cfg = load_config("llama-3-70b")
    big = plan_deployment(cfg, tp=8, pp=2, batch=64, context=4096)
    small = plan_deployment(cfg, tp=8, pp=2, batch=1, context=128)
    return {"weight_gib_per_gpu": max(big.weight_bytes) / 2**30, "kv_gib_per_gpu": max(big.kv_bytes) / 2**30,
            "nvlink_mib_per_step": max(big.nvlink_bytes) / 2**20, "network_mib_per_step": big.network_bytes / 2**20,
            "step_ms_batch64": big.step_time_s * 1e3, "step_ms_batch1": small.step_time_s * 1e3}


@needs_configs("llama-3-70b")
@pytest.mark.points(1)
@pytest.mark.parametrize("key", ["weight_gib_per_gpu", "kv_gib_per_gpu", "nvlink_mib_per_step", "network_mib_per_step",
                                 "step_ms_batch64", "step_ms_batch1"])
def test_numeric_answer_matches_your_own_plan(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "deployment_plan", key)
    expected = recomputed()[key]
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/deployment_plan.toml: {key} = {answer}, but your plan_deployment gives {expected:.5g} "
        f"(python -c 'from bench import plan_numbers; print(plan_numbers())' prints every value)")
