"""DeepSeek-V3's router: sigmoid affinities, an auxiliary-loss-free bias that steers which experts
are chosen (but not how much each counts), group-limited selection, and route scaling.

For a token with affinities s = sigmoid(x W^T) (E,):
  1. choice scores c = s + bias (the bias is raised for under-loaded experts between steps);
  2. experts form n_group equal groups; a group's score is the sum of its two largest c;
     only the topk_group best groups stay eligible;
  3. the top_k eligible experts by c are chosen;
  4. their weights are the *unbiased* s, divided by their sum when norm_topk_prob, then multiplied
     by routed_scaling_factor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class GateConfig:
    num_experts: int
    top_k: int
    n_group: int = 1
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    norm_topk_prob: bool = True

    def __post_init__(self) -> None:
        if self.n_group < 1 or self.num_experts % self.n_group:
            raise ValueError(f"{self.num_experts} experts do not split into {self.n_group} equal groups")
        per_group = self.num_experts // self.n_group
        if per_group < 2:
            raise ValueError(f"{per_group} expert(s) a group: a group's score needs its top 2")
        if not 1 <= self.topk_group <= self.n_group:
            raise ValueError(f"topk_group {self.topk_group}: must be in 1..n_group ({self.n_group})")
        if not 1 <= self.top_k <= self.topk_group * per_group:
            raise ValueError(f"top_k {self.top_k}: must be in 1..{self.topk_group * per_group} "
                             f"(experts in the {self.topk_group} eligible group(s))")


def group_mask(choice: Tensor, cfg: GateConfig) -> Tensor:
    """choice (T, E) -> bool (T, E): True for experts in the topk_group groups whose two largest
    choice scores sum highest."""
    grouped = choice.view(choice.shape[0], cfg.n_group, -1)  # (T, G, E/G)
    group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)  # (T, G)
    best = group_scores.topk(cfg.topk_group, dim=-1).indices
    keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best, True)
    return keep[:, :, None].expand_as(grouped).reshape(choice.shape)


def deepseek_v3_gate(x: Tensor, weight: Tensor, bias: Tensor, *, top_k: int, n_group: int = 1,
                     topk_group: int = 1, routed_scaling_factor: float = 1.0,
                     norm_topk_prob: bool = True) -> tuple[Tensor, Tensor]:
    """x (T, H), weight (E, H), bias (E,) -> (weights (T, k) fp32, indices (T, k) int64).
    Scores are computed in fp32."""
    cfg = GateConfig(weight.shape[0], top_k, n_group, topk_group, routed_scaling_factor, norm_topk_prob)
    scores = torch.sigmoid(x.float() @ weight.float().t())  # (T, E)
    choice = scores + bias.float()
    choice = choice.masked_fill(~group_mask(choice, cfg), float("-inf"))
    indices = choice.topk(cfg.top_k, dim=-1).indices
    weights = scores.gather(1, indices)
    if cfg.norm_topk_prob:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * cfg.routed_scaling_factor, indices
