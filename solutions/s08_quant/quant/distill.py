"""Knowledge distillation losses (知识蒸馏) on logits (..., V).

With temperature T: p = softmax(teacher / T), q = softmax(student / T), both over the last dim.
  forward KL  KL(p || q) = sum_v p (log p - log q)   mean-seeking: q must cover all of p's mass
  reverse KL  KL(q || p) = sum_v q (log q - log p)   mode-seeking: q may sit on one of p's modes
Each is averaged over the positions (every leading index, or those a mask keeps) and multiplied
by T^2: the gradient of the softened loss scales as 1 / T^2, and T^2 puts it back on the scale of
the hard-label loss (Hinton et al. 2015), so alpha keeps its meaning when T changes.
The teacher is not trained: no gradient flows into teacher_logits.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

Direction = Literal["forward", "reverse"]


def _masked_mean(per_position: Tensor, mask: Tensor | None) -> Tensor:
    """Mean of per_position (...) over the positions mask (...) keeps (all when mask is None)."""
    if mask is None:
        return per_position.mean()
    return (per_position * mask).sum() / mask.sum().clamp(min=1)


def kd_kl(
    student_logits: Tensor,
    teacher_logits: Tensor,
    temperature: float = 1.0,
    direction: Direction = "forward",
    mask: Tensor | None = None,
) -> Tensor:
    """T^2 * mean over positions of KL(p || q) ("forward") or KL(q || p) ("reverse"), a scalar.

    student_logits, teacher_logits: (..., V) of one float dtype; mask: bool (...) or None.
    Use log_softmax for the log-probabilities (softmax then log underflows to -inf).
    ValueError if temperature <= 0, the shapes differ, or direction is unknown.
    """
    # BEGIN SOLUTION
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(f"shapes differ: {tuple(student_logits.shape)} vs {tuple(teacher_logits.shape)}")
    if direction not in ("forward", "reverse"):
        raise ValueError(f"direction must be 'forward' or 'reverse', got {direction!r}")
    log_q = torch.log_softmax(student_logits / temperature, dim=-1)
    log_p = torch.log_softmax(teacher_logits.detach() / temperature, dim=-1)
    if direction == "forward":
        kl = (log_p.exp() * (log_p - log_q)).sum(dim=-1)
    else:
        kl = (log_q.exp() * (log_q - log_p)).sum(dim=-1)
    return temperature**2 * _masked_mean(kl, mask)
    # END SOLUTION


def cross_entropy(logits: Tensor, labels: Tensor, ignore_index: int = -100) -> Tensor:
    """Mean over positions with labels != ignore_index of -log softmax(logits)[label] (T = 1)."""
    # BEGIN SOLUTION
    keep = labels != ignore_index
    log_probs = torch.log_softmax(logits, dim=-1)
    picked = log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (...)
    return _masked_mean(-picked, keep)
    # END SOLUTION


def distillation_loss(
    student_logits: Tensor,
    teacher_logits: Tensor,
    labels: Tensor,
    temperature: float = 2.0,
    alpha: float = 0.5,
    direction: Direction = "forward",
    ignore_index: int = -100,
) -> Tensor:
    """alpha * kd_kl(..., temperature, direction) + (1 - alpha) * cross_entropy(student, labels),
    both averaged over the positions whose label is not ignore_index. ValueError if alpha is
    outside [0, 1]."""
    # BEGIN SOLUTION
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    keep = labels != ignore_index
    kd = kd_kl(student_logits, teacher_logits, temperature, direction, mask=keep)
    return alpha * kd + (1.0 - alpha) * cross_entropy(student_logits, labels, ignore_index)
    # END SOLUTION
