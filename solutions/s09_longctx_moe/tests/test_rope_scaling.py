"""rope_inv_freq against transformers' ROPE_INIT_FUNCTIONS for the same rope_parameters (fp32
inv_freq at "inv_freq, fp32"; the attention factor to 1e-9), and RopeScaling's refusals."""

from __future__ import annotations

import pytest
from checks import check_rope

from longmoe import rope_inv_freq

LLAMA31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}
CASES = {
    "linear x4, d=64": (64, 10000.0, {"rope_type": "linear", "factor": 4.0}, None),
    "dynamic x2 at 4x the training length": (128, 10000.0, {"rope_type": "dynamic", "factor": 2.0,
                                             "original_max_position_embeddings": 4096}, 16384),
    "dynamic within the training length (unchanged)": (128, 10000.0, {"rope_type": "dynamic", "factor": 2.0,
                                                       "original_max_position_embeddings": 4096}, 1000),
    "yarn x4, d=128": (128, 10000.0, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}, None),
    "llama3 (Llama 3.1), d=128": (128, 500000.0, LLAMA31, None),
}


@pytest.mark.points(2)
@pytest.mark.parametrize("name", sorted(CASES))
def test_rope_scaling_matches_transformers(name, tol):
    check_rope(name, CASES[name], tol("inv_freq, fp32"))


@pytest.mark.points(1)
def test_plain_rope_is_unscaled(tol):
    check_rope("no scaling, d=32", (32, 10000.0, None, None), tol("inv_freq, fp32"))


@pytest.mark.points(1)
@pytest.mark.parametrize("params, word", [
    ({"rope_type": "ntk"}, "rope_type"),
    ({"rope_type": "linear", "factor": 0.5}, "factor"),
    ({"rope_type": "yarn", "factor": 4.0}, "original_max_position_embeddings"),
    ({**LLAMA31, "low_freq_factor": 4.0, "high_freq_factor": 1.0}, "low_freq_factor"),
])
def test_invalid_scaling_is_refused_by_name(params, word):
    assert rope_inv_freq(64, 10000.0, {"rope_type": "linear", "factor": 2.0})[0].shape == (32,)  # the valid case
    with pytest.raises(ValueError, match=word):
        rope_inv_freq(64, 10000.0, params)
