"""Turns the logits of the sequences that complete a step into their next tokens."""

from __future__ import annotations

import torch
from torch import Tensor

from .sampling_params import SamplingParams


def sampling_probs(logits: Tensor, params: list[SamplingParams]) -> Tensor:
    """The distribution each row samples from. logits: (S, V) fp32; params[i] belongs to row i.

    Row i: divide by params[i].temperature (rows with temperature 0 are treated as temperature 1;
    they are greedy and never sample), then keep the top_k largest logits (ties with the k-th value
    are kept too; -1 keeps all), then, on the softmax of what is left, keep each token whose
    predecessors in descending order (equal probabilities in the sort's order) hold less than top_p
    of the mass: the smallest set whose mass reaches top_p, as HF's TopPLogitsWarper keeps. Returns
    the renormalised probabilities (S, V), zero outside the kept set.
    """
    vocab = logits.shape[-1]
    temps = torch.tensor([p.temperature if p.temperature > 0 else 1.0 for p in params],
                         dtype=logits.dtype, device=logits.device)
    top_k = torch.tensor([p.top_k if 0 < p.top_k < vocab else vocab for p in params], device=logits.device)
    top_p = torch.tensor([p.top_p for p in params], dtype=logits.dtype, device=logits.device)
    sorted_logits, order = (logits / temps[:, None]).sort(dim=-1, descending=True)
    kth = sorted_logits.gather(1, (top_k - 1)[:, None])
    sorted_logits = sorted_logits.masked_fill(sorted_logits < kth, float("-inf"))
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs
    sorted_logits = sorted_logits.masked_fill(mass_before >= top_p[:, None], float("-inf"))
    filtered = torch.empty_like(sorted_logits).scatter_(1, order, sorted_logits)
    return filtered.softmax(dim=-1)


def sample(logits: Tensor, params: list[SamplingParams], generators: list[torch.Generator | None]) -> list[int]:
    """Next token of each row. logits: (S, V) fp32.

    Greedy rows (temperature 0) take the argmax (lowest index on ties, like torch.argmax). Other rows
    draw one token from `sampling_probs` with torch.multinomial using generators[i] (None: torch's
    default generator). A row draws from its generator exactly once, so a seeded request's samples
    do not depend on the other rows.
    """
    tokens = logits.argmax(dim=-1)
    rows = [i for i, p in enumerate(params) if not p.greedy]
    if rows:
        probs = sampling_probs(logits[rows], [params[i] for i in rows])
        for j, i in enumerate(rows):
            tokens[i] = torch.multinomial(probs[j], 1, generator=generators[i])[0]
    return tokens.tolist()
