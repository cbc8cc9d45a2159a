"""Shared by tests/ and hidden/: tolerances, the published model configs, and a counter of the
torch.distributed calls a rank makes (used inside rank functions, which run beside the package).

Counting collectives is a diagnosis, not a proof: it sees calls made through torch.distributed's
Python functions (dist.all_reduce, dist.all_gather, ..., also under names the package imported
from there), not a call into torch's internals. The values each rank returns are what grade it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from autograder.testing import tolerances

# torch.distributed function -> the kind counted (the all-gather variants count as one kind)
COUNTED = {
    "all_reduce": "all_reduce", "all_gather": "all_gather", "all_gather_into_tensor": "all_gather",
    "reduce_scatter": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter", "broadcast": "broadcast",
    "reduce": "reduce", "all_to_all": "all_to_all", "all_to_all_single": "all_to_all", "gather": "gather",
    "scatter": "scatter", "send": "send", "recv": "recv", "isend": "send", "irecv": "recv", "barrier": "barrier",
    "batch_isend_irecv": "batch_isend_irecv",
}


@contextmanager
def counting_collectives(package: str = "parallel") -> Iterator[Counter]:
    """Within the block, count this process's calls to torch.distributed's collectives and
    point-to-point functions by kind (also through aliases the package's modules hold)."""
    import sys

    import torch.distributed as dist

    counts: Counter = Counter()
    patches = []
    for name, kind in COUNTED.items():
        original = getattr(dist, name, None)
        if original is None:
            continue

        def counted(*args, _original=original, _kind=kind, **kwargs):
            counts[_kind] += 1
            return _original(*args, **kwargs)

        owners = [dist] + [m for n, m in list(sys.modules.items())
                           if m is not None and (n == package or n.startswith(package + "."))]
        for owner in owners:
            for attr, value in list(vars(owner).items()):
                if value is original:
                    patches.append((owner, attr, original))
                    setattr(owner, attr, counted)
    try:
        yield counts
    finally:
        for owner, attr, original in reversed(patches):
            setattr(owner, attr, original)


def _config_dir() -> Path | None:
    """datasets/model_configs of the course tree (COURSE_ROOT, the folders above, the grader's)."""
    roots = [Path(os.environ["COURSE_ROOT"])] if os.environ.get("COURSE_ROOT") else []
    roots += list(Path(__file__).resolve().parents) + [Path.cwd(), *Path.cwd().parents]
    try:
        import autograder

        roots.append(Path(autograder.__file__).resolve().parents[1])
    except ImportError:
        pass
    return next((f for r in roots if (f := r / "datasets" / "model_configs").is_dir()), None)


CONFIG_DIR = _config_dir()


def needs_configs(*names: str) -> pytest.MarkDecorator:
    """Not graded here (a skip at setup) when this checkout lacks datasets/model_configs/<name>.json."""
    missing = [n for n in names if CONFIG_DIR is None or not (CONFIG_DIR / f"{n}.json").is_file()]
    return pytest.mark.skipif(bool(missing), reason=f"datasets/model_configs lacks {missing}")


def load_config(name: str) -> dict:
    """The published config.json of datasets/model_configs/<name>.json, as a dict."""
    return json.loads((CONFIG_DIR / f"{name}.json").read_text())


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
