"""Modified rejection sampling (Leviathan et al. 2023, Chen et al. 2023): verify gamma draft tokens
against the target's distributions so that the tokens kept are distributed exactly as the target's."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Verdict:
    """One round's outcome: the accepted drafts, then exactly one token drawn by the target.

    tokens: (num_accepted + 1) token ids: draft_tokens[:num_accepted], then the correction token
        (drawn from the residual at the first rejected position) or, when every draft was accepted,
        the bonus token drawn from the target's last row.
    """

    tokens: tuple[int, ...]
    num_accepted: int


def residual(p: Tensor, q: Tensor) -> Tensor:
    """norm(max(0, p - q)): where the target has more mass than the draft, renormalised.

    p, q: (V,) or (..., V) probabilities. Returns float32 of the same shape, rows summing to 1.
    A row where p <= q everywhere (p == q: no mass left, a rejection there has probability 0)
    returns p itself rather than 0/0.
    """
    raise NotImplementedError("p7.5: residual")


def accept(draft_tokens: Tensor, q: Tensor, p: Tensor, uniforms: Tensor) -> tuple[int, Tensor]:
    """The deterministic core of `verify`, given its uniform draws.

    draft_tokens: (g,) int64, draft token i drawn from q[i]. q: (g, V) the draft's distributions;
    p: (g + 1, V) the target's, row i for the position of draft i and row g for the position after
    the last draft. uniforms: (g,) in [0, 1).
    Draft i (in order) is accepted iff uniforms[i] < p[i, x] / q[i, x] (x = draft_tokens[i]); the
    first rejection stops the round. Returns (n, dist): n accepted drafts and the (V,) float32
    distribution of the one token that follows them: residual(p[n], q[n]) after a rejection at n,
    p[g] when all g are accepted (the bonus token).
    """
    raise NotImplementedError("p7.6: accept")


def verify(draft_tokens: Tensor, q: Tensor, p: Tensor, generator: torch.Generator | None = None) -> Verdict:
    """One round of modified rejection sampling (shapes as in `accept`).

    Draws, in this order and from `generator`: the g uniforms (`torch.rand(g, generator=...)`, on
    p's device), then one token from the distribution `accept` returns (`torch.multinomial(dist, 1,
    generator=...)`). Returns the Verdict; ValueError when the shapes disagree. With one-hot rows
    (greedy) it keeps the drafts that equal the target's argmax and ends with the target's argmax:
    greedy decoding of the target.
    """
    raise NotImplementedError("p7.7: verify")
