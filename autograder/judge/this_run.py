"""What this judge process holds for its run: the run's description, the worker that runs the
package, and a kernel exercise's audit worker. The plugin sets them as pytest starts (before any
conftest: judge/plugin.py); its hooks, the recorder, the fixtures and the timing read them here."""

from __future__ import annotations

from typing import Any

from autograder.judge.audit import GuardedAudit
from autograder.judge.client import WorkerClient
from autograder.judge.feedback import is_hidden
from autograder.judge.forkserver import ForkServer
from autograder.protocol.run import RunDescription

description: RunDescription | None = None  # this run's description (protocol/run.py), read before any conftest
worker: WorkerClient | None = None  # the worker that runs the package
guarded: GuardedAudit | None = None  # a kernel exercise's audit worker (judge/audit.py)
forkserver: ForkServer | None = None  # forks the CPU ranks' workers (judge/forkserver.py), started on first use


def client() -> WorkerClient:
    """The worker of this judge (tests reach the package only through it)."""
    if worker is None:
        raise RuntimeError("no worker: this run has no --ag-run description (the package is not graded here)")
    return worker


def fork_server() -> ForkServer:
    """This judge's fork server of rank workers (one zygote, started on first use)."""
    global forkserver
    if forkserver is None:
        forkserver = ForkServer()
    return forkserver


def client_if_started() -> WorkerClient | None:
    return worker


def redacted(nodeid: str) -> bool:
    """Whether this test's messages and output stay out of its record: a hidden test's, unless the
    host grades the course's own reference (then an instructor reads why a hidden test failed)."""
    return is_hidden(nodeid) and not (description is not None and description.reveal_hidden)


def has_guarded_audit() -> bool:
    """Whether this run is a kernel exercise with an audit worker (where timed callables are made again)."""
    return guarded is not None


def guarded_timing(fn: Any) -> tuple[WorkerClient, Any] | None:
    """Where a kernel exercise times worker callable `fn`: (the audit worker, fn made again there),
    so that no repetition can run torch's compute ops unrecorded; None in any other exercise."""
    return guarded.timing_target(fn) if guarded is not None else None
