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
    # BEGIN SOLUTION
    if x.shape[0] == 0:  # an idle DP rank: group_mask cannot reshape 0 rows into groups
        return torch.zeros(0, cfg.top_k), torch.zeros(0, cfg.top_k, dtype=torch.int64)
    scores = torch.sigmoid(x.float() @ router_weight.float().t())  # (T, E)
    choice = scores + router_bias.float()
    choice = choice.masked_fill(~group_mask(choice, gate), float("-inf"))
    experts = choice.topk(cfg.top_k, dim=-1).indices
    weights = scores.gather(1, experts)
    if cfg.norm_topk_prob:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * cfg.routed_scaling_factor, experts
    # END SOLUTION
