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
    raise NotImplementedError("p1.5: sampling_probs")


def sample(logits: Tensor, params: list[SamplingParams], generators: list[torch.Generator | None]) -> list[int]:
    """Next token of each row. logits: (S, V) fp32.

    Greedy rows (temperature 0) take the argmax (lowest index on ties, like torch.argmax). Other rows
    draw one token from `sampling_probs` with torch.multinomial using generators[i] (None: torch's
    default generator). A row draws from its generator exactly once, so a seeded request's samples
    do not depend on the other rows.
    """
    raise NotImplementedError("p1.6: sample")
