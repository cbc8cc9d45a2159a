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
    # BEGIN SOLUTION
    if not messages:
        raise ValueError("messages must not be empty")
    parts = []
    for i, m in enumerate(messages):
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise ValueError(f"messages[{i}]: unknown role {role!r}; known: {ROLES}")
        if not isinstance(content, str):
            raise ValueError(f"messages[{i}]: content must be a string")  # noqa: TRY004  one error type for bad messages
        parts.append(f"<|{role}|>\n{content}\n")
    return "".join(parts) + GENERATION_PROMPT
    # END SOLUTION
