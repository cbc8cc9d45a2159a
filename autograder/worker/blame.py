"""Where in the student's own code an exception came from, in the student's own paths, and what the judge needs to raise its mirror.

A traceback of the worker starts in the grader's dispatch and, for a Triton kernel run by the
interpreter, ends inside Triton (`InterpreterError` wraps the real error, raised while the
interpreter ran the kernel body). The line a student needs is the deepest frame in their package,
over the whole chain of causes: `tritonkernels/rmsnorm.py:47: rstd = tl.rsqrtt(mean_sq + eps)`.
Paths read relative to the staging folder (the worker's working directory), so they name the
student's files, not the grader's temporary copy.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

from autograder.worker.refs import exception_bases, qualified

MAX_CHAIN = 8
TEST_FOLDERS = ("tests", "hidden", "..")  # the staged tests and anything outside the staging folder


def _chain(exc: BaseException) -> list[BaseException]:
    """exc, then what caused it (explicitly, else implicitly), outermost first."""
    seen: list[BaseException] = []
    while exc is not None and len(seen) < MAX_CHAIN and all(exc is not s for s in seen):
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def student_frame(exc: BaseException, root: str | None = None) -> str:
    """'pkg/mod.py:LINE: source' of the deepest frame in a package folder of the staging folder (the
    graded package or a given one, never the staged tests) over exc's causes, or ''."""
    root = os.path.realpath(root or os.getcwd())
    where = ""
    for link in _chain(exc):
        for frame in traceback.extract_tb(link.__traceback__):
            rel = os.path.relpath(os.path.realpath(frame.filename), root)
            parts = rel.split(os.sep)
            if len(parts) > 1 and parts[0] not in TEST_FOLDERS:
                where = f"{rel}:{frame.lineno}" + (f": {frame.line.strip()}" if frame.line else "")
    return where


def student_paths(text: str, root: str | None = None) -> str:
    """A traceback's text with the staging folder's prefix dropped (paths as the student has them)."""
    root = os.path.realpath(root or os.getcwd())
    return text.replace(root + os.sep, "")


def describe(exc: BaseException) -> dict[str, Any]:
    """What the judge needs to raise its own mirror of `exc` (type, builtin bases, message)."""
    module, name = qualified(type(exc))
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001  a student exception whose __str__ raises
        message = f"<{name} whose message cannot be read>"
    text = student_paths("".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-12)))
    return {"type": name, "module": module, "bases": exception_bases(type(exc)), "message": message[:4000],
            "traceback": text[-6000:], "where": student_frame(exc)}
