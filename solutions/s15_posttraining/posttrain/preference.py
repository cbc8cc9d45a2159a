"""Preference losses on sequence log-probabilities of a chosen and a rejected completion.

DPO (Rafailov et al. 2023): the Bradley-Terry likelihood of the preference, with the policy's
implicit reward r = beta * (log pi(y|x) - log pi_ref(y|x)). SimPO (Meng et al. 2024): reference-free,
the reward being the *average* per-token log-prob, with a target margin gamma."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def dpo_loss(chosen_logps: Tensor, rejected_logps: Tensor, ref_chosen_logps: Tensor, ref_rejected_logps: Tensor,
             beta: float) -> tuple[Tensor, Tensor, Tensor]:
    """All inputs (B,): summed completion log-probs under the policy and the frozen reference.
    Returns (loss, chosen_rewards, rejected_rewards): loss = mean of -log sigmoid(beta * (
    (chosen - ref_chosen) - (rejected - ref_rejected))), a scalar; rewards (B,) = beta * (logps - ref), detached."""
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    # BEGIN SOLUTION
    chosen_ratio = chosen_logps - ref_chosen_logps.detach()
    rejected_ratio = rejected_logps - ref_rejected_logps.detach()
    loss = -F.logsigmoid(beta * (chosen_ratio - rejected_ratio)).mean()
    return loss, beta * chosen_ratio.detach(), beta * rejected_ratio.detach()
    # END SOLUTION


def simpo_loss(chosen_avg_logps: Tensor, rejected_avg_logps: Tensor, beta: float, gamma: float) -> Tensor:
    """SimPO: mean of -log sigmoid(beta * (chosen_avg - rejected_avg) - gamma); inputs (B,) are each
    completion's *mean* per-token log-prob (no reference model). Returns a scalar."""
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    # BEGIN SOLUTION
    return -F.logsigmoid(beta * (chosen_avg_logps - rejected_avg_logps) - gamma).mean()
    # END SOLUTION
