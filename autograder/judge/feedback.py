"""What a report says about a test: one line on why it failed, readable parameter ids."""

from __future__ import annotations

from autograder.judge.client import SUBMISSION_LINE


def failure_reason(exc: BaseException, limit: int = 400) -> str:
    """One line for the report: the exception and its message's first line, the student's own line
    when the submission raised it, and Hypothesis's falsifying example when there is one."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    parts = [f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__]
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, str) and note.startswith(SUBMISSION_LINE):
            parts.append(note.splitlines()[0])
        elif isinstance(note, str) and note.startswith("Falsifying example"):
            parts.append(" ".join(part.strip() for part in note.splitlines()))
    text = "; ".join(parts)
    return text if len(text) <= limit else text[: limit - 3] + "..."


SHORT_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
                "float8_e4m3fn": "fp8e4m3", "float8_e5m2": "fp8e5m2"}


def parameter_id(val: object) -> str | None:
    """Readable ids in reports: a torch dtype by its short name (bf16, not dtype1), a shape of ints as
    4x64 (not shape0). None leaves pytest's own id."""
    module = type(val).__module__
    if module == "torch" and type(val).__name__ == "dtype":
        name = str(val).removeprefix("torch.")
        return SHORT_DTYPES.get(name, name)
    if isinstance(val, tuple) and val and all(type(v) is int for v in val):
        return "x".join(str(v) for v in val)
    return None
