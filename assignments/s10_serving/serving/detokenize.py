"""Incremental detokenization: the text a stream sends after each step.

Decoding token by token and joining the pieces is wrong for a byte-level BPE: one character can
span two tokens (its first token alone decodes to U+FFFD, the replacement character). So decode
the whole completion each time and send what the text grew by, holding back a trailing U+FFFD
until the next token completes it. The joined deltas then equal decode(all tokens).
"""

from __future__ import annotations

REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    """push(token_ids) -> the new text; finish() -> what was held back. `tokenizer` has
    decode(ids, skip_special_tokens=True) (a `tokenizers.Tokenizer`)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.token_ids: list[int] = []
        self.sent = ""  # the text sent so far: a prefix of decode(token_ids)

    def push(self, token_ids: list[int]) -> str:
        """Append `token_ids`; return the text not yet sent, minus a trailing U+FFFD."""
        raise NotImplementedError("s10.7: IncrementalDetokenizer.push")

    def finish(self) -> str:
        """The text still held back (the stream ended on an incomplete character)."""
        raise NotImplementedError("s10.8: IncrementalDetokenizer.finish")
