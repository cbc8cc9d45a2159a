"""Text both sides print: reasons cut to a report's width without breaking a word."""

from __future__ import annotations


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary (never mid-word), marked " ..."."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 4]
    space = cut.rfind(" ", limit // 2)  # a word boundary in the second half; else one long token is cut
    return (cut[:space] if space > 0 else cut).rstrip() + " ..."
