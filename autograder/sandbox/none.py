"""The `none` backend: a plain subprocess with rlimits. As root it also gets a uid of its own and an
empty network namespace; as an ordinary user it can read and reach what that user can.

Root without the rights to make namespaces (a container with Docker's default capabilities, as on
some hosted graders) still grades: the run keeps the host's network, and the report says so
(`notes`); the rlimits, the private work dir and the own uid stay wherever they are possible.
"""

from __future__ import annotations

import os
import warnings

from autograder.sandbox.base import RunRequest, RunResult, python_reachable, run_process, sandbox_uid, with_own_uid
from autograder.sandbox.rights import network_isolation


class NoneBackend:
    name = "none"

    def available(self) -> tuple[bool, str]:
        return True, ""

    def notes(self) -> list[str]:
        """What this backend could not enforce here, for the report."""
        notes = []
        if os.geteuid() == 0 and (why := network_isolation()):
            notes.append(f"sandbox none: the tests ran with the host's network ({why}); "
                         "rlimits and the run's own work dir were enforced")
        if os.geteuid() == 0 and (sandbox_uid() is None or not python_reachable()):
            why = "this container may not switch uids" if sandbox_uid() is None else "the interpreter is under a private folder"
            notes.append(f"sandbox none: the tests ran as root ({why}): no RLIMIT_NPROC of their own")
        return notes

    def run(self, request: RunRequest) -> RunResult:
        if request.uid is None and sandbox_uid() is not None and not python_reachable():
            warnings.warn("the Python interpreter is not reachable by other users (e.g. under /root): "
                          "tests run as root without RLIMIT_NPROC protection; use --sandbox bwrap", stacklevel=2)
        else:  # the work dir (0700) goes to the run's uid only when the run becomes that uid
            request = with_own_uid(request)
        return run_process(list(request.argv), request, isolate_net=not network_isolation())
