"""Shared by tests/ and hidden/: tolerances, and a spy on torch.distributed.all_reduce that a rank
function installs beside the package (rank_programs.ddp_on_rank).

The spy's record is a diagnosis of *when* the package launched and waited for its all-reduces,
read against the test's own gradient hooks; the values each rank returns are checked against a
one-process oracle in the judge.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from autograder.testing import tolerances


class _SpiedWork:
    """A Work whose wait() is recorded in `events` before it waits."""

    def __init__(self, work, events: list) -> None:
        self._work, self._events = work, events

    def wait(self, *args, **kwargs):
        self._events.append(("wait",))
        return self._work.wait(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._work, name)


@contextmanager
def spying_all_reduce(events: list, package: str = "trainfw") -> Iterator[None]:
    """Within the block, every call of torch.distributed.all_reduce (also under the names the
    package's modules hold for it) appends ("all_reduce", numel, async_op) to `events`, and a
    returned work's wait() appends ("wait",)."""
    import torch.distributed as dist

    original = dist.all_reduce

    def spied(tensor, *args, **kwargs):
        async_op = bool(kwargs.get("async_op", args[2] if len(args) > 2 else False))
        events.append(("all_reduce", tensor.numel(), async_op))
        work = original(tensor, *args, **kwargs)
        if work is None:
            return None
        return _SpiedWork(work, events)

    owners = [dist] + [m for n, m in list(sys.modules.items())
                       if m is not None and (n == package or n.startswith(package + "."))]
    patches = [(o, a) for o in owners for a, v in list(vars(o).items()) if v is original]
    for owner, attr in patches:
        setattr(owner, attr, spied)
    try:
        yield
    finally:
        for owner, attr in patches:
            setattr(owner, attr, original)


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES
