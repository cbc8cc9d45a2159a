"""Top-k softmax routing (Mixtral, Switch with k = 1) and Switch Transformer's load-balancing loss.

Shapes: T tokens, E experts, k experts a token. Indices may come in any order within a row; a
token's weights are paired with its indices position by position.
"""

from __future__ import annotations

import torch
from torch import Tensor


def topk_softmax_routing(logits: Tensor, top_k: int, normalize: bool = True) -> tuple[Tensor, Tensor]:
    """logits (T, E) -> (weights (T, k) fp32, indices (T, k) int64): the k experts of largest
    softmax probability; with `normalize`, their probabilities renormalised to sum to 1 (Mixtral),
    else the raw probabilities (Switch)."""
    if not 1 <= top_k <= logits.shape[-1]:
        raise ValueError(f"top_k {top_k}: must be in 1..{logits.shape[-1]} (the number of experts)")
    probs = torch.softmax(logits.float(), dim=-1)
    weights, indices = torch.topk(probs, top_k, dim=-1)
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, indices


def switch_load_balancing_loss(logits: Tensor, top_k: int) -> Tensor:
    """Switch Transformer's auxiliary loss over T tokens (scalar, fp32):
        E * sum_e f_e * P_e,
    f_e = (number of top-k slots routed to expert e) / T  (so sum_e f_e = k),
    P_e = mean over tokens of softmax(logits)[:, e].
    Perfectly uniform routing gives k; every token on the same k experts with probability 1/k
    each gives E."""
    num_experts = logits.shape[-1]
    probs = torch.softmax(logits.float(), dim=-1)  # (T, E)
    _, indices = torch.topk(probs, top_k, dim=-1)
    counts = torch.zeros(num_experts).scatter_add_(0, indices.reshape(-1), torch.ones(indices.numel()))
    fraction = counts / logits.shape[0]
    return num_experts * torch.sum(fraction * probs.mean(dim=0))
