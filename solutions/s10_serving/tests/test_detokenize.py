"""Incremental detokenization with the course tokenizer: token by token, the joined deltas equal
decoding all tokens at once (decoded here, in the judge), and no delta carries a half character."""

from __future__ import annotations

import pytest
from conftest import decode, encode, model_dir

from autograder.testing import in_worker


@in_worker
def deltas_in_worker(folder: str, ids: list[int]) -> list[str]:
    """Your IncrementalDetokenizer over the course tokenizer, fed one token at a time, then finish()."""
    from pathlib import Path

    from serving import IncrementalDetokenizer
    from tokenizers import Tokenizer

    detok = IncrementalDetokenizer(Tokenizer.from_file(str(Path(folder) / "tokenizer.json")))
    return [detok.push([t]) for t in ids] + [detok.finish()]


@pytest.mark.points(2)
@pytest.mark.parametrize("text", ["Call me Ishmael.", "鲸鱼 and 海 — ünïcödé ✓ 🐋!"])
def test_deltas_join_to_the_whole_decode(text):
    ids = encode(text)
    deltas = deltas_in_worker(model_dir(), ids)
    assert "".join(deltas) == decode(ids), f"joined deltas {''.join(deltas)!r} != decode {decode(ids)!r}"
    bad = [d for d in deltas if "\ufffd" in d]
    assert not bad, f"deltas carrying a half character: {bad} (hold a trailing U+FFFD back)"
