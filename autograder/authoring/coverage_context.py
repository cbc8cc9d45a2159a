"""A coverage.py plugin for `autograder tasks` (authoring/taskmap.py): in a worker process, what one
request from the judge runs is recorded under the id of the test whose call it serves.

The package runs only in worker processes (the judge holds proxies), and the judge tells a worker
which test is running only by BEGIN_TEST, at the start of the test's call. So the context is taken
from the worker's own state: a request handled while a test session is open belongs to that test;
one handled outside (fixture set-up, collection) gets no dynamic context, and keeps the static one
that names the test file of the run. Coverage ends the context when the request returns and writes
its lines to the data file then, so a worker the judge later kills with SIGKILL loses nothing.
"""

from __future__ import annotations

import os
from types import FrameType
from typing import Any

import coverage

from autograder.protocol.messages import ENV_ROLE, ROLE_WORKER

# Worker._dispatch(self, op, args): every request, nested ones included, passes through it. The worker
# runs as `python -m autograder.worker.server`, so its module is __main__: matched by file and name.
DISPATCH = "_dispatch"
SERVER_FILE = os.path.join("autograder", "worker", "server.py")


class TestCallContext(coverage.CoveragePlugin):
    __test__ = False  # not a pytest test class

    def dynamic_context(self, frame: FrameType) -> str | None:
        code = frame.f_code
        if code.co_name != DISPATCH or not code.co_filename.endswith(SERVER_FILE):
            return None
        session = getattr(frame.f_locals.get("self"), "session", None)
        return getattr(session, "nodeid", None) or None


def coverage_init(reg: Any, options: dict[str, str]) -> None:
    """Registered in workers only: in the judge it would run on every Python call and find nothing."""
    if os.environ.get(ENV_ROLE) == ROLE_WORKER:
        reg.add_dynamic_context(TestCallContext())
