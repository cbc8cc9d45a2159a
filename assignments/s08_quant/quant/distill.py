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
    raise NotImplementedError("s08.1: kd_kl")


def cross_entropy(logits: Tensor, labels: Tensor, ignore_index: int = -100) -> Tensor:
    """Mean over positions with labels != ignore_index of -log softmax(logits)[label] (T = 1)."""
    raise NotImplementedError("s08.2: cross_entropy")


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
    raise NotImplementedError("s08.3: distillation_loss")
