"""The paper plan of Llama-3-70B on 2 x 8 H100 (TP=8 in a node, PP=2 across): the KV and the
network bytes the handout works out by hand; the hidden tests recompute every field."""

from __future__ import annotations

import pytest
from conftest import load_config, needs_configs
from tpp import Hardware, plan_deployment


@needs_configs("llama-3-70b")
@pytest.mark.points(2)
def test_70b_plan_splits_80_layers_and_one_kv_head_per_gpu():
    cfg = load_config("llama-3-70b")
    plan = plan_deployment(cfg, tp=8, pp=2, batch=64, context=4096)
    assert plan.layers == (40, 40)
    # 8 KV heads over TP=8: one per GPU; K and V of 40 layers, 128-wide heads, bf16
    assert plan.kv_bytes == (64 * 4096 * 2 * 40 * 1 * 128 * 2,) * 2
    # each of the 8 GPUs of stage 0 sends the whole (64, 8192) bf16 activation across
    assert plan.network_bytes == 8 * 64 * 8192 * 2
    assert plan.fits


@needs_configs("llama-3-70b")
@pytest.mark.points(1)
def test_one_gpu_plan_moves_nothing_and_does_not_fit():
    plan = plan_deployment(load_config("llama-3-70b"), tp=1, pp=1, batch=1, context=128, hw=Hardware())
    assert plan.nvlink_bytes == (0.0,) and plan.network_bytes == 0
    assert not plan.fits  # 141 GB of bf16 weights on an 80 GB GPU
