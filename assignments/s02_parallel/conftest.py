"""Shared by tests/ and hidden/: tolerances, the published model configs, and a counter of the
torch.distributed calls a rank makes (used inside rank functions, which run beside the package).

Counting collectives is a diagnosis, not a proof: it sees calls made through torch.distributed's
Python functions (dist.all_reduce, dist.all_gather, ..., also under names the package imported
from there), not a call into torch's internals. The values each rank returns are what grade it,
and with them what each message carried: each rank's weights and inputs are drawn by the judge
and sent to that rank only, so a message of the right size that carries other data (a decoy beside
a side channel) fails the test (rank_programs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.collective_spy import counting_collectives as _counting
from autograder.model_configs import CONFIG_DIR, load_config, needs_configs  # noqa: F401  (tests import them from here)
from autograder.testing import tolerances


def counting_collectives(package: str = "parallel", messages: list | None = None):
    """autograder.collective_spy.counting_collectives for this package (with `messages`, a copy of
    what this rank put into each send, all-reduce and all-gather, for the judge to check)."""
    return _counting(package, messages)


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES


# The topology oracle (tests/test_topology.py, hidden/test_topology_hidden.py): the grid of Megatron-Core's
# order, reshaped from arange(world), independent of the student's code.
KINDS = ("tp", "cp", "dp", "pp", "dp-cp", "tp-cp", "tp-pp", "tp-dp-cp", "ep", "edp", "tp-ep")
DECODER_AXES = ("pp", "dp", "cp", "tp")  # slowest first: row-major arange puts tp fastest
EXPERT_AXES = ("pp", "edp", "ep", "tp")


def sizes_of(tp=1, cp=1, dp=1, pp=1, ep=1) -> dict[str, int]:
    return {"tp": tp, "cp": cp, "dp": dp, "pp": pp, "ep": ep, "edp": dp * cp // ep}


def oracle_groups(sizes: dict[str, int], kind: str) -> list[list[int]]:
    """Groups of `kind`: move the kind's axes last and read the grid row by row."""
    import math

    import torch

    names = kind.split("-")
    axes = EXPERT_AXES if {"ep", "edp"} & set(names) else DECODER_AXES
    shape = [sizes[a] for a in axes]
    grid = torch.arange(math.prod(shape)).reshape(shape)
    inside = [i for i, a in enumerate(axes) if a in names]
    outside = [i for i, a in enumerate(axes) if a not in names]
    width = math.prod(shape[i] for i in inside)
    return grid.permute(*outside, *inside).reshape(-1, width).tolist()


def rows(schedule) -> list[str]:
    """A pipeline schedule as one string per stage, e.g. "F0 F1 B0 B1" (schedule tests)."""
    return [" ".join(f"{a.kind}{a.microbatch}" for a in stage) for stage in schedule]


def actions(*stages: str) -> list:
    """The schedule written as one string per stage, as lists of the package's Action."""
    from parallel import Action  # imported when called: the conftest also loads where the package may not

    return [[Action(tok[0], int(tok[1:])) for tok in stage.split()] for stage in stages]
