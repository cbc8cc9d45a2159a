"""Per-token log-probabilities of a completion, and the mask that keeps prompt and padding out.

Every loss of this package reads per-token log-probs of the *completion* tokens only: the prompt
was given, not chosen by the policy, and padding was never generated. Getting this mask wrong by
one position is the most common bug in RL fine-tuning code."""

from __future__ import annotations

import torch
from torch import Tensor


def completion_logprobs(logits: Tensor, input_ids: Tensor, prompt_lengths: Tensor,
                        lengths: Tensor) -> tuple[Tensor, Tensor]:
    """log p(token t+1 | tokens <= t) for every position, and the completion mask.

    logits: (B, T, V) float, the model's output over input_ids (B, T) int64 (prompt, then the
    completion, then right padding). prompt_lengths, lengths: (B,) int64, the prompt's length and
    the whole sequence's (prompt + completion) length, 1 <= prompt_lengths < lengths <= T.
    Returns (logps, mask), both (B, T - 1): logps[b, t] = log_softmax(logits[b, t])[input_ids[b, t + 1]]
    (float32), mask[b, t] = 1.0 iff token t + 1 is a completion token (prompt_lengths[b] <= t + 1 < lengths[b]).
    """
    if logits.dim() != 3 or input_ids.shape != logits.shape[:2]:
        raise ValueError(f"logits {tuple(logits.shape)} must be (B, T, V) over input_ids (B, T), got {tuple(input_ids.shape)}")
    if bool((prompt_lengths < 1).any()) or bool((lengths <= prompt_lengths).any()) or bool((lengths > input_ids.shape[1]).any()):
        raise ValueError(f"need 1 <= prompt_lengths < lengths <= T={input_ids.shape[1]}: "
                         f"prompt_lengths {prompt_lengths.tolist()}, lengths {lengths.tolist()}")
    raise NotImplementedError("s15.5: completion_logprobs")
