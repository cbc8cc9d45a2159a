"""PPO's pieces (Schulman et al. 2017) with GAE (Schulman et al. 2016), per token of a completion.

Shapes: (B, T) over the completion tokens of B sequences; `mask` (B, T) is 1.0 on real tokens and
0.0 on right padding. A masked token contributes nothing to any sum or mean."""

from __future__ import annotations

import torch
from torch import Tensor


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of x over the tokens where mask is 1 (every token of the batch weighs the same)."""
    # BEGIN SOLUTION
    return (x * mask).sum() / mask.sum().clamp(min=1.0)
    # END SOLUTION


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over each completion, ending at its last real token.

    rewards, values, mask: (B, T). delta_t = r_t + gamma * V_{t+1} - V_t, with V after the last real
    token taken as 0 (the episode ends there); A_t = delta_t + gamma * lam * A_{t+1}, computed
    backwards. Returns (advantages, returns = advantages + values), both (B, T), 0 on padding.
    """
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    # BEGIN SOLUTION
    r, v = rewards * mask, values * mask                      # padding: no reward, no value
    adv = torch.zeros_like(v)
    last = torch.zeros_like(v[:, 0])
    for t in reversed(range(v.shape[1])):
        next_v = v[:, t + 1] if t + 1 < v.shape[1] else torch.zeros_like(last)
        delta = r[:, t] + gamma * next_v - v[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + v) * mask
    # END SOLUTION


def ppo_policy_loss(logps: Tensor, old_logps: Tensor, advantages: Tensor, mask: Tensor,
                    clip_eps: float) -> Tensor:
    """The clipped surrogate, as a loss to minimise, averaged over the batch's real tokens.

    ratio = exp(logps - old_logps); per token loss = max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)).
    The gradient reaches logps only; old_logps and advantages are constants.
    """
    if clip_eps <= 0:
        raise ValueError(f"clip_eps must be > 0, got {clip_eps}")
    # BEGIN SOLUTION
    ratio = torch.exp(logps - old_logps.detach())
    adv = advantages.detach()
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1 - clip_eps, 1 + clip_eps)
    return masked_mean(torch.maximum(unclipped, clipped), mask)
    # END SOLUTION


def ppo_value_loss(values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor,
                   clip_eps: float) -> Tensor:
    """The clipped value loss: 0.5 * masked mean of max((V - R)^2, (V_clipped - R)^2), with
    V_clipped = old_V + clip(V - old_V, -eps, eps). Gradient reaches `values` only."""
    if clip_eps <= 0:
        raise ValueError(f"clip_eps must be > 0, got {clip_eps}")
    # BEGIN SOLUTION
    old, ret = old_values.detach(), returns.detach()
    clipped = old + (values - old).clamp(-clip_eps, clip_eps)
    return 0.5 * masked_mean(torch.maximum((values - ret) ** 2, (clipped - ret) ** 2), mask)
    # END SOLUTION
