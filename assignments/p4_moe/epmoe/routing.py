"""The router on an EP rank: DeepSeek-V3's gate (stage 9: sigmoid scores, the bias only to choose,
groups by the sum of their top two via longmoe.group_mask), whose weights are what combine sums with."""

from __future__ import annotations

import torch
from longmoe import GateConfig, group_mask
from torch import Tensor

from epmoe.config import MoEConfig


def route(x: Tensor, router_weight: Tensor, router_bias: Tensor, cfg: MoEConfig) -> tuple[Tensor, Tensor]:
    """x (T, H), router_weight (E, H), router_bias (E,) -> (weights (T, k) fp32, experts (T, k) int64).
    The chosen experts' weights are the *unbiased* sigmoid scores (renormalised when
    cfg.norm_topk_prob, then times cfg.routed_scaling_factor): the bias steers who computes,
    never how much a computed expert counts. T = 0 gives empty (0, k) tensors."""
    gate = GateConfig(cfg.num_experts, cfg.top_k, cfg.n_group, cfg.topk_group, cfg.routed_scaling_factor,
                      cfg.norm_topk_prob)
    raise NotImplementedError("p4.15: route")
