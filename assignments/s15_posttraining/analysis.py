"""The analysis of README "Analysis": how GRPO's loss types weigh the tokens of long and short
completions, on one fixed group, with YOUR package. Run:  python analysis.py

One prompt, a group of 4 completions of lengths 3, 15, 5, 9 tokens with rewards 1, 0, 1, 0 (two
correct short answers, a long and a shorter wrong one), max_completion_length 16, beta 0, clip 0.2.
"""

from __future__ import annotations

import torch

LENGTHS = [3, 15, 5, 9]
REWARDS = [1.0, 0.0, 1.0, 0.0]
T = 16
LONG_WRONG, SHORT_WRONG = 1, 3   # rows of the batch


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logps, old_logps, mask, rewards): (4, 16) seeded log-probs near a real policy's, off-policy by a little."""
    g = torch.Generator().manual_seed(2025)
    logps = -torch.rand(4, T, generator=g) * 3
    old = logps + torch.randn(4, T, generator=g) * 0.1
    mask = (torch.arange(T)[None] < torch.tensor(LENGTHS)[:, None]).float()
    return logps, old, mask, torch.tensor(REWARDS)


def numbers(loss_and_grad, group_advantages) -> dict[str, float]:
    """loss_and_grad(logps, old, ref, adv, mask, config: dict, num_items) -> (loss, d loss / d logps),
    group_advantages(rewards, group_size) -> (N,): your package's (see __main__)."""
    logps, old, mask, rewards = batch()
    adv = group_advantages(rewards, 4)
    out = {"advantage_correct": float(adv[0]), "advantage_wrong": float(adv[LONG_WRONG])}
    for loss_type in ("grpo", "bnpo", "dr_grpo"):
        _, grad = loss_and_grad(logps, logps.clone(), None, adv, mask, {"loss_type": loss_type, "max_completion_length": T}, None)
        out[f"weight_ratio_{loss_type}"] = float(grad[LONG_WRONG, 0].abs() / grad[SHORT_WRONG, 0].abs())
    out["loss_bnpo_whole"] = float(loss_and_grad(logps, old, None, adv, mask, {"loss_type": "bnpo"}, None)[0])
    halves = (slice(0, 2), slice(2, 4))
    out["loss_bnpo_accumulated"] = sum(float(loss_and_grad(logps[h], old[h], None, adv[h], mask[h],
                                                           {"loss_type": "bnpo"}, None)[0]) for h in halves) / 2
    total = int(mask.sum())
    out["loss_dapo_accumulated"] = sum(float(loss_and_grad(logps[h], old[h], None, adv[h], mask[h],
                                                           {"loss_type": "dapo"}, total)[0]) for h in halves)
    return out


def _local_loss_and_grad(logps, old, ref, adv, mask, config, num_items):
    from posttrain import GRPOConfig, grpo_loss

    leaf = logps.clone().requires_grad_(True)
    loss = grpo_loss(leaf, old, ref, adv, mask, GRPOConfig(**config), num_items)
    (grad,) = torch.autograd.grad(loss, leaf)
    return loss.detach(), grad


if __name__ == "__main__":
    from posttrain import group_advantages

    for key, value in numbers(_local_loss_and_grad, group_advantages).items():
        print(f"{key} = {value:.6g}")
