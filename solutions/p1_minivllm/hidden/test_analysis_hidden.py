"""The step analysis of README "Analysis": each number of answers/step_analysis.toml against the same
quantity recomputed from the student's answers/step_profile.json (written by step_profile.py from
their engine). The file is checked first: its schema, plausible values, and byte counts that
agree with the model it names (a LLaMA's parameter and KV sizes follow from its config)."""

from __future__ import annotations

import json
import statistics

import pytest
from bench import PRESETS

from autograder.testing import numeric_answer, read_answer

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def llama_bytes(model: dict) -> tuple[int, int, int]:
    """(weight bytes, embedding-table bytes, KV bytes per token) of an untied LLaMA config."""
    v, h, i, n = model["vocab_size"], model["hidden_size"], model["intermediate_size"], model["num_hidden_layers"]
    kv_dim = model["num_key_value_heads"] * h // model["num_attention_heads"]
    per_layer = 2 * h * h + 2 * h * kv_dim + 3 * h * i + 2 * h  # q, o; k, v; gate, up, down; two norms
    params = 2 * v * h + n * per_layer + h  # embedding, LM head, layers, final norm
    b = DTYPE_BYTES[model["dtype"]]
    return params * b, v * h * b, 2 * n * kv_dim * b


def load_profile(root) -> dict:
    """answers/step_profile.json, checked; AssertionError naming what is wrong."""
    try:
        data = json.loads(read_answer(root, "answers/step_profile.json"))
    except json.JSONDecodeError as e:
        raise AssertionError(f"answers/step_profile.json is not valid JSON: {e}") from None
    keys = {"device", "model", "weight_bytes", "embedding_bytes", "kv_bytes_per_token", "copy_bytes_per_s", "steps"}
    assert isinstance(data, dict) and keys <= data.keys(), f"answers/step_profile.json needs the keys {sorted(keys)}"
    model = data["model"]
    assert isinstance(model, dict) and model.get("preset") in PRESETS and model.get("dtype") in DTYPE_BYTES, (
        "answers/step_profile.json: model must name a preset of bench.py and a dtype; run step_profile.py")
    assert {k: model[k] for k in PRESETS[model["preset"]]} == PRESETS[model["preset"]], (
        "answers/step_profile.json: the model's config differs from bench.py's preset")
    assert (data["weight_bytes"], data["embedding_bytes"], data["kv_bytes_per_token"]) == llama_bytes(model), (
        "answers/step_profile.json: weight, embedding or KV byte counts disagree with the model it names")
    assert 1e8 <= data["copy_bytes_per_s"] <= 1e14, "answers/step_profile.json: copy_bytes_per_s is implausible"
    steps = data["steps"]
    assert isinstance(steps, list) and len(steps) >= 10, "answers/step_profile.json: time at least 10 steps"
    for s in steps:
        assert 0 < s["seconds"] < 60 and s["rows"] >= 1 and s["tokens_held"] >= s["rows"], (
            f"answers/step_profile.json: implausible step record {s}")
    return data


def recomputed(data: dict) -> dict[str, float]:
    weights = data["weight_bytes"] - data["embedding_bytes"]
    kv = statistics.fmean(s["tokens_held"] * data["kv_bytes_per_token"] for s in data["steps"])
    bound_s = (weights + kv) / data["copy_bytes_per_s"]
    median_s = statistics.median(s["seconds"] for s in data["steps"])
    return {"weight_mb_read": weights / 1e6, "kv_mb_read": kv / 1e6, "bound_ms": bound_s * 1e3,
            "median_step_ms": median_s * 1e3, "roofline_fraction": bound_s / median_s}


@pytest.mark.points(1)
def test_the_step_profile_is_from_the_model_it_names(request):
    load_profile(request.config.rootpath)


@pytest.mark.points(1)
@pytest.mark.parametrize("key", ["weight_mb_read", "kv_mb_read", "bound_ms", "median_step_ms", "roofline_fraction"])
def test_numeric_answer_matches_your_step_profile(key, request, tol):
    expected = recomputed(load_profile(request.config.rootpath))[key]
    answer = numeric_answer(request.config.rootpath, "step_analysis", key)
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/step_analysis.toml: {key} = {answer}, but your answers/step_profile.json gives {expected:.4g}")
