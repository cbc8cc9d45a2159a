"""The paper's model of the effect: acceptance, expected tokens per target call, and the speedup."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def acceptance_rate(p: Tensor, q: Tensor) -> Tensor:
    """beta = sum over the vocabulary of min(p, q): the probability that a draft drawn from q is
    accepted against p (Leviathan et al., section 3.1); 1 - beta is the total variation distance.

    p, q: (..., V). Returns float32 (...). The paper's alpha is the mean of beta over positions.
    """
    raise NotImplementedError("p7.11: acceptance_rate")


def expected_tokens_per_call(alpha: float, gamma: int) -> float:
    """Expected tokens one target call produces when each draft is accepted independently with
    probability alpha: (1 - alpha^(gamma + 1)) / (1 - alpha), which is gamma + 1 at alpha = 1.

    Raises ValueError for alpha outside [0, 1] or gamma < 0.
    """
    raise NotImplementedError("p7.12: expected_tokens_per_call")


def expected_tokens_from_rates(rates: Sequence[float]) -> float:
    """The same expectation when draft i is accepted with its own probability rates[i] (given that
    drafts 0..i-1 were): 1 + r0 + r0 r1 + ... + r0 r1 ... r(g-1). Equals expected_tokens_per_call
    when every rate is alpha. Raises ValueError for a rate outside [0, 1]."""
    raise NotImplementedError("p7.13: expected_tokens_from_rates")


def expected_speedup(alpha: float, gamma: int, c: float) -> float:
    """The paper's walltime improvement: (1 - alpha^(gamma + 1)) / ((1 - alpha)(gamma c + 1)), where c
    is the cost of one draft step over one target step. Raises ValueError for c < 0."""
    raise NotImplementedError("p7.14: expected_speedup")
