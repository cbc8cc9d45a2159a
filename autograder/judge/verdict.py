"""One test's verdict and record: what the judge saw of it (pytest's three phases, the plugin's call
wrapper, the sentinel around the body, the worker's accounting) and the signed record made of it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from autograder.judge.feedback import HIDDEN_DETAIL
from autograder.protocol.messages import RecordKind, Status

# Lines the profiler library (Kineto) writes to stderr each time the accounting starts or stops it
# ("USDT:2026-12-01 10:37:00 14401:14401 SyncActivityProfilerHandler.cpp:52] profiler_start"): noise
# in a student's captured output.
PROFILER_LOG = re.compile(r"^(?:USDT|INFO|WARNING):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \w+\.cpp:\d+\].*\n?", re.MULTILINE)
MAX_OUTPUT_CHARS = 3000


@dataclass
class TestState:
    """What the judge saw of one test: pytest's three phases, this plugin's call wrapper and the
    sentinel around the test function, the worker's accounting and what the test attached."""

    setup: str = ""
    call: str = ""
    teardown: str = ""
    call_raised: str = ""
    entered: bool = False
    completed: bool = False
    output: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    attachments: list[dict[str, str]] = field(default_factory=list)  # name, file, sha256 of each attached PNG
    not_graded: str = ""
    duration: float = 0.0
    violation: str = ""  # what the op / kernel accounting found; fails the test whatever pytest says
    failure: str = ""  # one line on why the body raised: the report's reason for a failed test
    held: str = ""  # the body raised the judge's HeldForReview: why its pass would rest on the worker's word


def verdict(state: TestState) -> tuple[str, str]:
    """(status, reason) from the three independent views of what happened."""
    if state.setup == "skipped":
        return Status.NOT_GRADED.value, state.not_graded or "skipped before the test body ran"
    if state.setup == "failed":
        return Status.ERROR.value, "setup (fixtures) failed"
    if state.violation:
        if state.call_raised == "NotImplementedError":  # an unwritten task: its id first, what to do next
            return Status.FAILED.value, f"{state.failure}\n{state.violation}"
        return Status.FAILED.value, state.violation
    if state.call == "skipped":
        return Status.FAILED.value, "the test was skipped from inside its body; that counts as a failure"
    if state.held and state.call == "failed" and state.entered:  # the body stopped at HeldForReview, nothing else
        return (Status.ERROR.value, "teardown failed") if state.teardown == "failed" else (Status.HELD.value, state.held)
    if state.call != "passed":  # pytest's outcome
        return Status.FAILED.value, state.failure
    if state.call_raised or not (state.entered and state.completed):
        return Status.FAILED.value, "pytest reported a pass the test body never reached (tampering suspected)"
    if state.teardown == "failed":
        return Status.ERROR.value, "teardown failed"
    return Status.PASSED.value, ""


def record_of(nodeid: str, state: TestState, *, redact: bool) -> dict[str, Any]:
    """The TEST record of one finished test: its verdict and its output, hidden tests' output redacted
    (tracebacks echo values; the worker's output is its own) and long output cut in the middle."""
    status, reason = verdict(state)
    output = PROFILER_LOG.sub("", "\n".join(state.output))
    if redact and output:
        output = f"[output] {HIDDEN_DETAIL}"
    if len(output) > MAX_OUTPUT_CHARS:
        output = output[: MAX_OUTPUT_CHARS // 3] + "\n...\n" + output[-2 * MAX_OUTPUT_CHARS // 3 :]
    return {"kind": RecordKind.TEST.value, "nodeid": nodeid, "status": status, "reason": reason,
            "output": output, "metrics": state.metrics, "duration": state.duration,
            "attachments": state.attachments}
