"""Sandbox backends behind one interface: `backend.run(RunRequest) -> RunResult`.

- `bwrap`: an empty root with only what a grading needs bound read-only (system libraries, the
  interpreter and venv, the grader, the data), private /tmp, no network, new pid namespace; only
  the work dir is writable.
- `none`: a plain subprocess with rlimits (and, as root, its own uid and network namespace where
  the container allows them; `notes()` says what it could not enforce).
- `docker`: one named container per run through the Docker SDK: no network, memory and pids limits,
  GPUs when needed (for runners).
"""

from __future__ import annotations

import warnings
from typing import Protocol

from autograder.errors import GraderError
from autograder.sandbox.base import RunRequest, RunResult
from autograder.sandbox.bwrap import BwrapBackend
from autograder.sandbox.docker import DockerBackend
from autograder.sandbox.none import NoneBackend

__all__ = ["BACKENDS", "CHOICES", "Backend", "RunRequest", "RunResult", "select_backend"]


class Backend(Protocol):
    name: str

    def available(self) -> tuple[bool, str]:
        """(usable here?, why not)."""
        ...

    def run(self, request: RunRequest) -> RunResult: ...

    def notes(self) -> list[str]:
        """What this backend could not enforce here (for the report); empty when all of it holds."""
        ...


BACKENDS = {"bwrap": BwrapBackend, "none": NoneBackend, "docker": DockerBackend}
CHOICES = ("auto", *BACKENDS)  # what --sandbox accepts, in every command (autograder/options.py)


def select_backend(name: str = "auto", *, gpu: bool = True) -> Backend:
    """The named backend, or for 'auto' bwrap where it works, else 'none' with a visible warning.
    docker: $AUTOGRADER_IMAGE, else the GPU image (gpu) or the CPU one."""
    if name == "auto":
        bwrap = BwrapBackend()
        ok, why = bwrap.available()
        if ok:
            return bwrap
        warnings.warn(f"bwrap sandbox unavailable ({why}); grading with rlimits only (--sandbox none)", stacklevel=2)
        return NoneBackend()
    if name not in BACKENDS:
        raise GraderError(f"unknown sandbox {name!r}; choose one of auto, {', '.join(BACKENDS)}")
    backend = DockerBackend(gpu=gpu) if name == "docker" else BACKENDS[name]()
    ok, why = backend.available()
    if not ok:
        raise GraderError(f"sandbox {name!r} is not usable here: {why}")
    return backend
