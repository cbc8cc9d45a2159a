"""The course's chat template: how a list of chat messages becomes one prompt string.

The course tokenizer has no template of its own (it knows two special tokens), so the course fixes
one in plain text. For messages [{"role": "system", "content": "Be brief."},
{"role": "user", "content": "Hi"}] the prompt is

    "<|system|>\\nBe brief.\\n<|user|>\\nHi\\n<|assistant|>\\n"

that is, "<|{role}|>\\n{content}\\n" for each message in order, then the generation prompt
"<|assistant|>\\n". Roles: system, user, assistant. The markers are ordinary text to the BPE.
"""

from __future__ import annotations

ROLES = ("system", "user", "assistant")
GENERATION_PROMPT = "<|assistant|>\n"


def apply_chat_template(messages: list[dict]) -> str:
    """The prompt for `messages` (dicts with "role" and "content" strings), ending with the
    generation prompt. ValueError for an empty list, an unknown role or a content that is not a string."""
    raise NotImplementedError("s10.6: apply_chat_template")
