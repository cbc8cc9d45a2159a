"""The distributions both models sample from: the same temperature and top-p on the draft and the target."""

from __future__ import annotations

import torch
from torch import Tensor
from transformer import SamplingParams, process_logits


def to_probs(logits: Tensor, params: SamplingParams) -> Tensor:
    """The distribution a token is drawn from, one row per position.

    logits: (T, V) of either model. Returns float32 (T, V), each row summing to 1.
    Sampled (temperature > 0): softmax of `transformer.process_logits(logits, params)` (temperature,
    then top-k, top-p, min-p: the stage-1 pipeline). Greedy (temperature 0): the one-hot row of the
    argmax (the first index on ties), so that rejection sampling with one-hot rows is greedy decoding.
    Draft and target rows must go through this one function: speculative decoding preserves the
    target's *processed* distribution only when both models' rows are processed alike.
    """
    # BEGIN SOLUTION
    if params.greedy:
        probs = torch.zeros(logits.shape, dtype=torch.float32, device=logits.device)
        return probs.scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    return torch.softmax(process_logits(logits, params), dim=-1)
    # END SOLUTION
