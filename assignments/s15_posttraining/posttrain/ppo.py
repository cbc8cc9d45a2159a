"""PPO's pieces (Schulman et al. 2017) with GAE (Schulman et al. 2016), per token of a completion.

Shapes: (B, T) over the completion tokens of B sequences; `mask` (B, T) is 1.0 on real tokens and
0.0 on right padding. A masked token contributes nothing to any sum or mean."""

from __future__ import annotations

import torch
from torch import Tensor


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of x over the tokens where mask is 1 (every token of the batch weighs the same)."""
    raise NotImplementedError("s15.6: masked_mean")


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over each completion, ending at its last real token.

    rewards, values, mask: (B, T). delta_t = r_t + gamma * V_{t+1} - V_t, with V after the last real
    token taken as 0 (the episode ends there); A_t = delta_t + gamma * lam * A_{t+1}, computed
    backwards. Returns (advantages, returns = advantages + values), both (B, T), 0 on padding.
    """
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    raise NotImplementedError("s15.7: gae")


def ppo_policy_loss(logps: Tensor, old_logps: Tensor, advantages: Tensor, mask: Tensor,
                    clip_eps: float) -> Tensor:
    """The clipped surrogate, as a loss to minimise, averaged over the batch's real tokens.

    ratio = exp(logps - old_logps); per token loss = max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)).
    The gradient reaches logps only; old_logps and advantages are constants.
    """
    if clip_eps <= 0:
        raise ValueError(f"clip_eps must be > 0, got {clip_eps}")
    raise NotImplementedError("s15.8: ppo_policy_loss")


def ppo_value_loss(values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor,
                   clip_eps: float) -> Tensor:
    """The clipped value loss: 0.5 * masked mean of max((V - R)^2, (V_clipped - R)^2), with
    V_clipped = old_V + clip(V - old_V, -eps, eps). Gradient reaches `values` only."""
    if clip_eps <= 0:
        raise ValueError(f"clip_eps must be > 0, got {clip_eps}")
    raise NotImplementedError("s15.9: ppo_value_loss")
