"""RoPE settings under every key layout transformers reads, with transformers' config as the oracle.

transformers 4 wrote `rope_theta` at the top level and the scaling in `rope_scaling` (its type under
`type`, later `rope_type`); transformers 5 writes both inside `rope_parameters` (type "default" when
unscaled). Each real config (and the course model's) is rewritten in each layout, unscaled and
scaled, and `from_config` must read the same type and theta as transformers' own config class.
"""

from __future__ import annotations

import json
import warnings

import pytest
from conftest import REAL, real
from modelmath import from_config

import coursedata

# Scalings of the kinds real checkpoints ship (Llama 3.1's llama3, Qwen2.5's yarn, linear), with
# the parameters transformers validates for each.
SCALINGS = {
    "linear": {"factor": 2.0},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 4096},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192},
}


def _course_config() -> dict:
    return json.loads((coursedata.model_path("course-llama") / "config.json").read_text())


def _base(name: str) -> tuple[dict, float, dict | None]:
    """The config without any RoPE key, its theta, and its own scaling (None when unscaled)."""
    cfg = _course_config() if name == "course-llama" else real(name)
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    theta = float(cfg.get("rope_theta") or rope.get("rope_theta"))
    own = {k: v for k, v in rope.items() if k not in ("rope_theta", "type", "rope_type")}
    kind = rope.get("rope_type") or rope.get("type")
    bare = {k: v for k, v in cfg.items() if k not in ("rope_theta", "rope_scaling", "rope_parameters")}
    return bare, theta, (None if kind in (None, "default") else {"rope_type": kind, **own})


def _layouts(bare: dict, theta: float, scaling: dict | None) -> dict[str, dict]:
    """The same RoPE settings written the ways transformers 4 and 5 read them."""
    legacy = None if scaling is None else dict(scaling)
    legacy_type = None if scaling is None else {("type" if k == "rope_type" else k): v for k, v in scaling.items()}
    current = {"rope_type": "default", "rope_theta": theta} | (scaling or {})
    return {
        "legacy rope_scaling + rope_theta": bare | {"rope_theta": theta, "rope_scaling": legacy},
        "legacy rope_scaling with 'type'": bare | {"rope_theta": theta, "rope_scaling": legacy_type},
        "current rope_parameters": bare | {"rope_parameters": current},
        "current rope_parameters beside rope_theta": bare | {"rope_theta": theta, "rope_parameters": current},
    }


def _oracle(cfg: dict) -> tuple[str | None, float]:
    """The scaling type (None when unscaled) and theta of transformers' config class for `cfg`."""
    from transformers import AutoConfig

    fields = {k: v for k, v in cfg.items() if k not in ("auto_map", "quantization_config", "architectures")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rope = AutoConfig.for_model(**fields).rope_parameters
    kind = rope["rope_type"]
    return (None if kind == "default" else kind), float(rope["rope_theta"])


@pytest.mark.parametrize("name", (*REAL, "course-llama"))
def test_rope_type_and_theta_match_transformers_under_legacy_and_current_keys(name):
    bare, theta, own = _base(name)
    scalings = {"as published": own} | {kind: {"rope_type": kind, **p} for kind, p in SCALINGS.items()}
    for label, scaling in scalings.items():
        for layout, cfg in _layouts(bare, theta, scaling).items():
            expected = _oracle(cfg)
            a = from_config(cfg)
            assert (a.rope_scaling, a.rope_theta) == expected, (
                f"{name}, RoPE {label}, written as {layout}: {json.dumps({k: cfg.get(k) for k in ('rope_theta', 'rope_scaling', 'rope_parameters')})}\n"
                f"  from_config read rope_scaling={a.rope_scaling!r}, rope_theta={a.rope_theta}; "
                f"transformers reads {expected[0]!r}, {expected[1]}")
