"""GRPO (Shao et al. 2024, DeepSeekMath): PPO's clipped surrogate with no value model, the advantage
of a completion being its reward normalised within the group of completions of the same prompt.

The loss types differ only in how the per-token losses are averaged (Liu et al. 2025, Dr. GRPO):
  grpo     mean over sequences of each sequence's token mean (a token of a short completion weighs more)
  bnpo     mean over the micro-batch's completion tokens
  dr_grpo  sum over tokens / (num sequences * max_completion_length): a constant, no length bias
  dapo     sum over tokens / num_items_in_batch, the completion tokens of the whole generation batch
           (TRL 1.16's default: equal to bnpo on one micro-batch, but the same token weight across
           gradient-accumulation steps)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
SCALES = ("group", "batch", "none")


@dataclass(frozen=True)
class GRPOConfig:
    """loss_type: one of LOSS_TYPES. beta: weight of the k3 KL estimate to the reference policy
    (0: no reference needed). epsilon_low / epsilon_high: the clip range [1 - low, 1 + high] of the
    ratio. max_completion_length: dr_grpo's constant denominator (tokens per completion)."""

    loss_type: str = "dapo"
    beta: float = 0.0
    epsilon_low: float = 0.2
    epsilon_high: float = 0.2
    max_completion_length: int | None = None

    def __post_init__(self) -> None:
        # BEGIN SOLUTION
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type {self.loss_type!r}: choose one of {LOSS_TYPES}")
        if self.beta < 0 or self.epsilon_low <= 0 or self.epsilon_high <= 0:
            raise ValueError(f"need beta >= 0 and epsilons > 0, got {self.beta}, {self.epsilon_low}, {self.epsilon_high}")
        if self.loss_type == "dr_grpo" and not (self.max_completion_length or 0) > 0:
            raise ValueError("loss_type 'dr_grpo' needs max_completion_length > 0")
        # END SOLUTION


def group_advantages(rewards: Tensor, group_size: int, scale: str = "group", eps: float = 1e-4) -> Tensor:
    """rewards: (N,) with N = num_prompts * group_size, the completions of one prompt contiguous.
    A_i = (r_i - mean of its group) / (std + eps), std the *unbiased* (n - 1) standard deviation of
    the group ("group"), of the whole batch ("batch"), or no division at all ("none"). Returns (N,) float32."""
    if group_size < 2 or rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(f"need 1-D rewards in groups of group_size >= 2, got {tuple(rewards.shape)} and {group_size}")
    if scale not in SCALES:
        raise ValueError(f"scale {scale!r}: choose one of {SCALES}")
    # BEGIN SOLUTION
    grouped = rewards.float().view(-1, group_size)                           # (num_prompts, G)
    centred = (grouped - grouped.mean(dim=1, keepdim=True)).reshape(-1)
    if scale == "none":
        return centred
    std = grouped.std(dim=1).repeat_interleave(group_size) if scale == "group" else rewards.float().std()
    return centred / (std + eps)
    # END SOLUTION


def per_token_loss(logps: Tensor, old_logps: Tensor, ref_logps: Tensor | None, advantages: Tensor,
                   config: GRPOConfig) -> Tensor:
    """(B, T) per-token loss: -min(ratio * A, clip(ratio) * A) + beta * KL_k3(ref || policy).
    advantages: (B,) one per completion, broadcast over its tokens. KL_k3 = exp(ref - logps) - (ref - logps) - 1."""
    if config.beta != 0 and ref_logps is None:
        raise ValueError("beta != 0 needs ref_logps")
    # BEGIN SOLUTION
    ratio = torch.exp(logps - old_logps.detach())
    adv = advantages.detach()[:, None]
    clipped = ratio.clamp(1 - config.epsilon_low, 1 + config.epsilon_high)
    loss = -torch.minimum(ratio * adv, clipped * adv)
    if config.beta != 0:
        diff = ref_logps.detach() - logps
        loss = loss + config.beta * (torch.exp(diff) - diff - 1)
    return loss
    # END SOLUTION


def aggregate(loss: Tensor, mask: Tensor, config: GRPOConfig, num_items_in_batch: int | None = None) -> Tensor:
    """The scalar loss from (B, T) per-token losses and the completion mask, by config.loss_type
    (module docstring). num_items_in_batch: dapo's denominator (default: mask.sum())."""
    # BEGIN SOLUTION
    masked = loss * mask
    if config.loss_type == "grpo":
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if config.loss_type == "bnpo":
        return masked.sum() / mask.sum().clamp(min=1.0)
    if config.loss_type == "dr_grpo":
        return masked.sum() / (loss.shape[0] * config.max_completion_length)
    items = mask.sum() if num_items_in_batch is None else torch.tensor(float(num_items_in_batch))
    return masked.sum() / items.clamp(min=1.0)
    # END SOLUTION


def grpo_loss(logps: Tensor, old_logps: Tensor, ref_logps: Tensor | None, advantages: Tensor, mask: Tensor,
              config: GRPOConfig, num_items_in_batch: int | None = None) -> Tensor:
    """GRPO's scalar loss. logps, old_logps, ref_logps, mask: (B, T) over completion tokens;
    advantages: (B,). With beta = 0 and old_logps == logps (on-policy) the value is exactly 0, yet
    the gradient is -A_i / (the loss type's denominator) per token: never drop a term that is 0."""
    if logps.shape != mask.shape or old_logps.shape != mask.shape or advantages.shape != mask.shape[:1]:
        raise ValueError(f"logps {tuple(logps.shape)}, old_logps {tuple(old_logps.shape)} and mask "
                         f"{tuple(mask.shape)} must be (B, T), advantages {tuple(advantages.shape)} (B,)")
    return aggregate(per_token_loss(logps, old_logps, ref_logps, advantages, config), mask, config,
                     num_items_in_batch)
