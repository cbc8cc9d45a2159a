"""What a report says about a test: one line on why it failed, readable parameter ids."""

from __future__ import annotations

import builtins
import re

from autograder.judge.replies import SUBMISSION_LINE
from autograder.protocol.messages import AnswerProblem
from autograder.protocol.text import shorten

HIDDEN_DIR = "hidden/"
# A hidden run's worker may hold the text of a hidden test module (an in_worker helper's source):
# whatever it prints, and any value it returns that a message echoes, stays out of the records.
HIDDEN_DETAIL = "(a hidden test: the submission's output and the values in its message are not shown)"
TASK_ID = re.compile(r"[sp]\d{1,2}\.\d{1,3}: [A-Za-z_]\w{0,60}")  # an untouched stub's NotImplementedError
FORBIDDEN = re.compile(r"[\w.]{1,80} is forbidden in this assignment: implement it yourself")  # worker/forbid.py


def is_hidden(nodeid: str) -> bool:
    return nodeid.startswith(HIDDEN_DIR)


_PATTERN = r"[\w.:*?\[\]-]{1,80}"  # a forbidden-op or kernel pattern of the rules (the judge's text)
# What a hidden test's accounting verdict keeps: each reason's template with the names the worker's
# ledger gave (ops, kernels, call sites) left out; the rules' own patterns and counts stay.
_HIDDEN_VERDICTS = (
    (re.compile(rf"the submission ran .* \(forbidden here: ({_PATTERN})\)"),
     "the submission ran an op forbidden here ({0}); implement it yourself"),
    (re.compile(rf"the timed code ran the library kernel .* \(forbidden here: ({_PATTERN})\)"),
     "the timed code ran a library kernel forbidden here ({0})"),
    (re.compile(r"a tensor left torch \(.*"), "a tensor left torch outside the package's kernels"),
    (re.compile(r"the submission computed with .* outside its own Triton kernels"),
     "the submission computed outside its own Triton kernels"),
    (re.compile(r"(the submission read \d+ scalars off the device in \d+ call\(s\)).*"), "{0}"),
    (re.compile(r"(the package's own kernels took \d+% of the GPU time of the audited call).*"), "{0}"),
    (re.compile(r"(no Triton kernel of [\w.]{1,80} ran: this exercise is to write it)"), "{0}"),
    (re.compile(r"(the op accounting saw \d+ of the \d+ calls into the submission \(switched off or tampered with\))"),
     "{0}"),
    (re.compile(r"the op and kernel accounting sent no valid ledger.*"), "the op and kernel accounting sent no valid ledger"),
)


def hidden_violation(verdict: str) -> str:
    """A hidden test's accounting verdict without any name the worker supplied (see HIDDEN_DETAIL)."""
    kept = []
    for reason in verdict.split("; "):
        for pattern, template in _HIDDEN_VERDICTS:
            if match := pattern.fullmatch(reason.strip()):
                kept.append(template.format(*match.groups()))
                break
    generic = "the op and kernel accounting failed this test"
    return "; ".join(dict.fromkeys(kept or [generic])) + f" {HIDDEN_DETAIL}"


def hidden_reason(exc: BaseException) -> str:
    """The reason of a hidden test that raised: the builtin exception type, and an untouched stub's
    task id; never the message (its values may come from the submission) nor a type it named."""
    if isinstance(exc, AnswerProblem):  # the judge's words about the student's own answer file
        return failure_reason(exc)
    name = type(exc).__name__
    builtin = getattr(builtins, name, None)
    if not (isinstance(builtin, type) and issubclass(builtin, BaseException)):
        return f"an exception {HIDDEN_DETAIL}"
    message = (str(exc).strip().splitlines() or [""])[0].strip()
    if (name == "NotImplementedError" and TASK_ID.fullmatch(message)) or \
            (name == "RuntimeError" and FORBIDDEN.fullmatch(message)):
        return f"{name}: {message}"
    example = reproducer(exc)  # the operations Hypothesis drew in the judge: the test's, not the worker's
    return f"{name} {HIDDEN_DETAIL}" + (f"; {example}" if example else "")


REPRODUCER_CHARS = 600


def reproducer(exc: BaseException) -> str:
    """Hypothesis's shrunk failing case on one line ("" when there is none): a property test's
    falsifying example, or a state machine's steps (`state = Model()`, `state.allocate(n=3)`, ...)."""
    notes = [n for n in getattr(exc, "__notes__", ()) if isinstance(n, str)]
    found = ""
    for i, note in enumerate(notes):
        if note.startswith("Falsifying example"):
            found = " ".join(part.strip() for part in note.splitlines())
            break
        if note.startswith("Failing test case"):
            steps = [n.strip() for n in notes[i + 1:] if n.startswith("state")]
            found = "steps to reproduce: " + "; ".join(s for s in steps if s != "state.teardown()")
            break
    return found if len(found) <= REPRODUCER_CHARS else found[: REPRODUCER_CHARS - 3] + "..."


def message_line(message: str) -> str:
    """A message on one line: its first line, and the lines after it when the first is only a
    heading (ends in "!" or ":"), as torch's "Tensor-likes are not close!" before the numbers or
    the multi-rank "... failed while the test ran f:" before each rank's reason."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].endswith(("!", ":")) and len(lines) > 1:
        return f"{lines[0]} {'; '.join(lines[1:])}"
    return lines[0]


def failure_reason(exc: BaseException, limit: int = 400) -> str:
    """One line for the report: the exception and its message (the numbers after a heading line
    included), the student's own line when the submission raised it, and Hypothesis's falsifying
    example when there is one."""
    line = message_line(str(exc))
    parts = [f"{type(exc).__name__}: {line}" if line else type(exc).__name__]
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, str) and note.startswith(SUBMISSION_LINE):
            parts.append(note.splitlines()[0])
    text = shorten("; ".join(parts), limit)
    example = reproducer(exc)
    return f"{text}; {example}" if example else text


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
