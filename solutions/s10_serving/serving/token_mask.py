"""From a character automaton to a token mask: which vocabulary tokens may come next.

A token is a string of several characters, so a token is allowed in a state when the automaton
survives *all* of its characters from there; EOS is allowed exactly when the document is
complete. The mask must never remove the only valid continuation (the model would be forced into
an invalid token or stall) and never admit an invalid one.

    masker = TokenMasker(JsonFSM(schema), token_strings(tokenizer), eos_id=0)
    state = masker.fsm.start()
    ids = masker.allowed(state)          # sorted token ids
    state = masker.advance(state, tid)   # after sampling tid
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping

import torch
from torch import Tensor

from .json_fsm import JsonFSM, State


def token_strings(tokenizer, vocab_size: int) -> list[str | None]:
    """Each token's text, or None for tokens a document of the subset can never use: special
    tokens and tokens whose text is not all printable ASCII (then decode([id]) is exact)."""
    out: list[str | None] = []
    special = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
    for i in range(vocab_size):
        text = tokenizer.id_to_token(i)
        s = None if text is None or text in special else tokenizer.decode([i], skip_special_tokens=False)
        out.append(s if s and all(" " <= c <= "~" for c in s) else None)
    return out


class TokenMasker:
    """Token masks of one automaton over one vocabulary (`strings[i]` the text of token i, None for
    a token never allowed). Masks are cached per state."""

    def __init__(self, fsm: JsonFSM, strings: list[str | None], eos_id: int) -> None:
        self.fsm, self.strings, self.eos_id = fsm, strings, eos_id
        self.by_first: dict[str, list[int]] = defaultdict(list)  # first character -> token ids
        for i, s in enumerate(strings):
            if s:
                self.by_first[s[0]].append(i)
        self._cache: dict[State, list[int]] = {}

    def allowed(self, state: State) -> list[int]:
        """Sorted ids of the tokens whose every character the automaton accepts from `state`, plus
        eos_id when `state` is final."""
        # BEGIN SOLUTION
        if state in self._cache:
            return self._cache[state]
        ids = []
        for first, group in self.by_first.items():
            after = self.fsm.step(state, first)
            if after is None:
                continue
            ids += [i for i in group if self.fsm.walk(after, self.strings[i][1:]) is not None]
        if self.fsm.is_final(state):
            ids.append(self.eos_id)
        self._cache[state] = sorted(ids)
        return self._cache[state]
        # END SOLUTION

    def advance(self, state: State, token_id: int) -> State:
        """The state after token_id (EOS leaves it as it is). ValueError for a token the mask
        did not allow."""
        # BEGIN SOLUTION
        if token_id == self.eos_id and self.fsm.is_final(state):
            return state
        text = self.strings[token_id] if 0 <= token_id < len(self.strings) else None
        after = self.fsm.walk(state, text) if text else None
        if after is None:
            raise ValueError(f"token {token_id} ({text!r}) is not allowed in state {state}")
        return after
        # END SOLUTION


def apply_mask(logits: Tensor, allowed: list[int]) -> Tensor:
    """logits (V,) with every entry outside `allowed` set to -inf (a new tensor)."""
    # BEGIN SOLUTION
    out = torch.full_like(logits, float("-inf"))
    idx = torch.tensor(allowed, dtype=torch.long, device=logits.device)
    out[idx] = logits[idx]
    return out
    # END SOLUTION


def mask_rows(logits: Tensor, seq_ids: list[int], allowed_of: Callable[[int], list[int] | None]) -> Tensor:
    """logits (S, V), row i sampling for seq_ids[i]: each row whose request is constrained
    (allowed_of(seq_id) is a list) masked with `apply_mask`, the others as they are."""
    # BEGIN SOLUTION
    for row, seq_id in enumerate(seq_ids):
        allowed = allowed_of(seq_id)
        if allowed is not None:
            logits[row] = apply_mask(logits[row], allowed)
    return logits
    # END SOLUTION


def masked_run(runner, batch, sampling: Mapping, allowed_of: Callable[[int], list[int] | None],
               before_forward: Callable[[object], None] | None = None) -> dict[int, int]:
    """minivllm's ModelRunner.run with a mask applied to each sampling row whose request is
    constrained (`allowed_of(seq_id)` is not None) before sampling. Eager only (no CUDA graphs).
    before_forward(batch), when given, runs before the model (the engine sets the LoRA slots there)."""
    from minivllm import sample

    with torch.inference_mode():
        inp = runner.prepare(batch)
        if before_forward is not None:
            before_forward(batch)
        hidden = runner.model(inp.input_ids, inp.positions, inp.attn, runner.kv_cache)
        if not inp.sample_seq_ids:
            return {}
        logits = runner.model.compute_logits(hidden[inp.logits_indices])
        if any(allowed_of(s) is not None for s in inp.sample_seq_ids):  # free batches never need your masks
            logits = mask_rows(logits, inp.sample_seq_ids, allowed_of)
        params = [sampling[s][0] for s in inp.sample_seq_ids]
        generators = [sampling[s][1] for s in inp.sample_seq_ids]
        return dict(zip(inp.sample_seq_ids, sample(logits, params, generators)))
