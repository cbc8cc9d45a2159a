"""Speculative decoding with two stage-1 `Llama` models: the draft proposes gamma tokens one at a
time, the target checks them all in one forward pass, and `verify` keeps a prefix of them."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from transformer import GREEDY, KVCache, Llama, SamplingParams

from specdec.probs import to_probs
from specdec.rejection import verify
from specdec.theory import acceptance_rate


@dataclass(frozen=True)
class SpecOutput:
    """What one speculative generation did.

    tokens: the max_new_tokens generated token ids (the last round cut to fit).
    round_tokens: tokens each target call produced (num_accepted + 1, so 1..gamma + 1), one entry per
        call in order, before the cut: sum(round_tokens) >= len(tokens).
    draft_calls: forward passes of the draft model: gamma per round (d_gamma is never fed in its own
        round), plus one for the prefill when the prompt has more than one token.
    """

    tokens: tuple[int, ...]
    round_tokens: tuple[int, ...]
    draft_calls: int

    @property
    def target_calls(self) -> int:
        """Verification forwards of the target (one per round; the prompt's prefill not counted)."""
        return len(self.round_tokens)

    @property
    def tokens_per_call(self) -> float:
        """Mean tokens per target call, the quantity (1 - a^(g+1)) / (1 - a) predicts."""
        return sum(self.round_tokens) / len(self.round_tokens)


def feed(model: Llama, cache: KVCache, tokens: list[int], keep: int) -> Tensor:
    """Roll `cache` back to its first `keep` slots, run `model` on `tokens` after them, return the
    logits (len(tokens), V) of the new positions. Slots past `keep` are stale and get overwritten."""
    raise NotImplementedError("p7.1: feed")


@torch.no_grad()
def speculative_generate(target: Llama, draft: Llama, prompt_ids: list[int], *, max_new_tokens: int,
                         gamma: int, params: SamplingParams = GREEDY,
                         generator: torch.Generator | None = None) -> SpecOutput:
    """Generate max_new_tokens tokens after prompt_ids; their distribution is the target's alone.

    Both models share one vocabulary and get their own KVCache (`model.new_cache(1, n)`, n = prompt
    + max_new_tokens + gamma + 1). First both are prefilled on prompt_ids[:-1] (nothing if the prompt
    has one token). Between rounds the target's cache holds every committed token but the last; the
    draft's holds every committed token but the last (but the last two after a round that accepted all
    gamma drafts), then possibly stale slots of rejected drafts. A round:
      1. draft, gamma calls (Leviathan et al., Algorithm 1): call i feeds what the draft's cache
         lacks (call 1: the committed tokens from the first it lacks to the last; call i > 1:
         d_(i-1)), then q_i = to_probs(last logits row, params), d_i = torch.multinomial(q_i, 1,
         generator) (greedy rows are one-hot, so this is the argmax). d_gamma is not fed this round;
      2. target: one call on [last committed token, d_1 .. d_gamma] (gamma + 1 tokens) gives
         p = to_probs(logits, params), (gamma + 1, V);
      3. verdict = verify(d, q, p, generator); commit verdict.tokens; the next calls roll each
         cache back past its rejected drafts (`feed`'s keep).
    ignore EOS: generation runs to max_new_tokens. gamma >= 1 and max_new_tokens >= 1, else ValueError.
    """
    if gamma < 1 or max_new_tokens < 1 or not prompt_ids:
        raise ValueError(f"need gamma >= 1, max_new_tokens >= 1 and a prompt, got gamma={gamma}, "
                         f"max_new_tokens={max_new_tokens}, {len(prompt_ids)} prompt tokens")
    raise NotImplementedError("p7.2: speculative_generate")


@torch.no_grad()
def measure_acceptance(target: Llama, draft: Llama, token_ids: list[int], prompt_len: int,
                       params: SamplingParams = GREEDY) -> Tensor:
    """The paper's beta at every generated position: one forward of each model over token_ids (prompt
    then output), rows prompt_len - 1 .. len - 2 (the distributions of tokens prompt_len .. len - 1),
    each through to_probs, then acceptance_rate. Returns float32 (len(token_ids) - prompt_len,);
    its mean is alpha. ValueError when prompt_len is not in 1 .. len(token_ids) - 1."""
    if not 1 <= prompt_len < len(token_ids):
        raise ValueError(f"prompt_len must be in 1..{len(token_ids) - 1}, got {prompt_len}")
    raise NotImplementedError("p7.3: measure_acceptance")
