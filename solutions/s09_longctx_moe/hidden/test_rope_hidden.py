"""More RoPE scalings against transformers: DeepSeek-V3's YaRN (factor 40, mscale and
mscale_all_dim), an explicit attention factor, YaRN bands clamped at both ends, Llama-3 with other
bands, dynamic scaling with a factor other than 1, linear scaling by 1 (no change)."""

from __future__ import annotations

import pytest
from checks import check_rope

CASES = {
    "yarn DeepSeek-V3 (x40, mscale 1, mscale_all_dim 1), d=64": (64, 10000.0, {
        "rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32,
        "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}, None),
    "yarn x40, mscale 1, mscale_all_dim 0.707, d=64": (64, 10000.0, {
        "rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "mscale": 1.0,
        "mscale_all_dim": 0.707}, None),
    "yarn x8 with an explicit attention factor 1.25, d=96": (96, 1000000.0, {
        "rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 32768, "attention_factor": 1.25}, None),
    "yarn x16, short training context (ramp clamped), d=32": (32, 10000.0, {
        "rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 256, "beta_fast": 8, "beta_slow": 2}, None),
    "llama3 x32, bands 2..16, d=64": (64, 10000.0, {
        "rope_type": "llama3", "factor": 32.0, "low_freq_factor": 2.0, "high_freq_factor": 16.0,
        "original_max_position_embeddings": 4096}, None),
    "dynamic x4 at 3x the training length, d=64": (64, 10000.0, {
        "rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 2048}, 6144),
    "linear x1 (unchanged), d=16": (16, 500.0, {"rope_type": "linear", "factor": 1.0}, None),
}


@pytest.mark.points(1)
@pytest.mark.parametrize("name", sorted(CASES))
def test_more_rope_scalings_match_transformers(name, tol):
    check_rope(name, CASES[name], tol("inv_freq, fp32"))
