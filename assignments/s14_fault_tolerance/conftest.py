"""Shared by tests/ and hidden/: the tolerances of assignment.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.testing import in_worker, tolerances

_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES


@in_worker
def new_supervisor(timeout: float, min_nodes: int, max_restarts: int, nodes: list[int], root: str):
    """A Supervisor built in the submission's process (the judge holds a proxy of it)."""
    from faulttol import Supervisor, SupervisorConfig

    return Supervisor(SupervisorConfig(timeout, min_nodes, max_restarts), nodes, root)


def _plain(action) -> tuple:
    from faulttol import Kill, Launch, Stop

    if isinstance(action, Kill):
        return ("kill", tuple(action.nodes))
    if isinstance(action, Launch):
        return ("launch", dict(action.ranks), action.world, action.resume_step, action.generation)
    if isinstance(action, Stop):
        return ("stop", str(action.reason))
    raise TypeError(f"the supervisor answered {action!r}: not a Kill, Launch or Stop")


@in_worker
def supervisor_launch(sup, now: float) -> tuple:
    return _plain(sup.launch(now))


@in_worker
def supervisor_tick(sup, now: float, beats: list[tuple], exits: dict[int, int]) -> list[tuple]:
    """sup.tick with Beat(node, generation, step, time) made from each tuple; the actions as tuples."""
    from faulttol import Beat

    return [_plain(a) for a in sup.tick(now, [Beat(*b) for b in beats], exits)]
