"""The course chat template, exactly as the handout states it."""

from __future__ import annotations

import pytest
from conftest import chat_prompt
from serving import apply_chat_template


@pytest.mark.points(1)
def test_template_matches_the_handout():
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Again?"}]
    assert apply_chat_template(msgs) == chat_prompt(msgs)


@pytest.mark.points(1)
@pytest.mark.parametrize("bad", [[], [{"role": "robot", "content": "x"}], [{"role": "user", "content": 3}]])
def test_template_refuses_bad_messages(bad):
    with pytest.raises(ValueError):
        apply_chat_template(bad)
    assert apply_chat_template([{"role": "user", "content": "ok"}]).endswith("<|assistant|>\n")
