"""Probe: before any test runs, start Python in the sandbox and import the student's package once.

This tells two faults apart from a student's zero. If Python, pytest or the grader's plugin cannot
start inside the sandbox, no test could ever report: that is the grader's set-up, and grading stops
with a `GraderError` saying so. If importing the package hangs, every test file would hang at
collection until its wall limit (half an hour for a large assignment): the tests fail at once with
that reason instead. An import error (a SyntaxError, say) is shown once, first, with file and line.

The markers are printed by trusted code before the student's package loads; student code can only
add or hide the later ones, which costs it time or a clear note, never points.
"""

from __future__ import annotations

from dataclasses import dataclass

from autograder.errors import GraderError
from autograder.sandbox import RunResult

MARKER = "autograder-probe:"
IMPORT_TIMEOUT_S = 120.0  # importing torch and friends on a busy 2-core machine takes well under this

SCRIPT = f"""
import os, sys, traceback
import pytest, autograder.judge.plugin
print("{MARKER} grader-ok", flush=True)
from autograder.judge.worker_view import available
if why := available():  # the worker's own view (test files covered) cannot be built in this sandbox
    print(f"{MARKER} no-worker-view {{why}}", flush=True)

def where(exc):
    if isinstance(exc, SyntaxError) and exc.filename:
        return os.path.relpath(exc.filename), exc.lineno
    here = os.getcwd() + os.sep
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(here)]
    return (os.path.relpath(frames[-1].filename), frames[-1].lineno) if frames else (None, None)

try:
    if os.path.isfile("conftest.py"):  # the master conftest: it may set up (TRITON_INTERPRET) or import first
        __import__("conftest")
    __import__(sys.argv[1])
except BaseException as exc:
    path, line = where(exc)
    at = f" in {{path}} line {{line}}" if path else ""
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    print(f"{MARKER} import-error {{type(exc).__name__}}{{at}}: {{message}}".replace("\\n", " ")[:400], flush=True)
    sys.exit(3)
print("{MARKER} import-ok", flush=True)
"""


@dataclass(frozen=True)
class ImportProbe:
    """What one probe run showed."""

    grader_ok: bool   # Python, pytest and the plugin started inside the sandbox
    hung: bool        # importing the package did not finish within the time limit
    error: str = ""   # why the import failed, e.g. "SyntaxError in demo/ops.py line 3: invalid syntax"
    no_view: str = ""  # why the worker's own view (test files covered) cannot be built here, if it cannot


def probe_argv(python: str, package: str) -> list[str]:
    return [python, "-c", SCRIPT, package]


def read_probe(run: RunResult) -> ImportProbe:
    """Interpret the probe's output and exit; a missing start marker means the grader is broken."""
    lines = [line.strip() for line in run.output.splitlines() if line.startswith(MARKER)]
    events = [line[len(MARKER):].strip() for line in lines]
    if "grader-ok" not in events:
        return ImportProbe(grader_ok=False, hung=False)
    errors = [e.removeprefix("import-error").strip() for e in events if e.startswith("import-error")]
    no_view = next((e.removeprefix("no-worker-view").strip() for e in events if e.startswith("no-worker-view")), "")
    if errors:
        return ImportProbe(grader_ok=True, hung=False, error=errors[-1], no_view=no_view)
    if "import-ok" in events:
        return ImportProbe(grader_ok=True, hung=False, no_view=no_view)
    if run.timed_out:
        return ImportProbe(grader_ok=True, hung=True, no_view=no_view)
    return ImportProbe(grader_ok=True, hung=False, no_view=no_view,
                       error=f"the process ended while importing the package "
                             f"({run.describe().removeprefix('the test process ')})")


def setup_error(run: RunResult, sandbox: str) -> GraderError:
    """The error for a sandbox in which Python with pytest and the grader plugin cannot start."""
    how = "did not start within the time limit" if run.timed_out else f"exited with status {run.returncode}"
    return GraderError(
        f"grader set-up error, not the submission's fault: Python with pytest and the autograder plugin cannot "
        f"start inside the {sandbox!r} sandbox ({how}); check that the interpreter, its packages and the "
        f"autograder are visible there (or try --sandbox none). Its output:\n{run.output.strip()[-1500:]}")


def hang_reason(timeout_s: float) -> str:
    return (f"importing the package did not finish within {timeout_s:g} s (an endless loop or a wait at import "
            "time?); no test could start")
