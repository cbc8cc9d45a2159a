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


def _payload(kind: str, args: tuple, kwargs: dict):
    """The tensor a rank contributes to a call of `kind` (None where it sends nothing of its own)."""
    if kind in ("all_reduce", "send", "broadcast", "reduce"):
        return kwargs.get("tensor", args[0] if args else None)
    if kind == "all_gather":  # all_gather(tensor_list, tensor), all_gather_into_tensor(output, input)
        return kwargs.get("tensor", kwargs.get("input_tensor", args[1] if len(args) > 1 else None))
    return None


def _peer(args: tuple, kwargs: dict):
    return kwargs.get("dst", kwargs.get("group_dst", args[1] if len(args) > 1 else None))


@contextmanager
def counting_collectives(package: str = "parallel", messages: list | None = None) -> Iterator[Counter]:
    """Within the block, count this process's calls to torch.distributed's collectives and
    point-to-point functions by kind (also through aliases the package's modules hold). With
    `messages`, also append {"kind", "peer", "op", "data": a copy of the tensor this rank put in}
    for each send, all-reduce and all-gather, for the judge to check what crossed (rank_programs).
    A call made from inside another counted call (dist.send runs isend) is counted once."""
    import sys
    import threading

    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    counts: Counter = Counter()
    inside = threading.local()
    patches = []

    def record(kind: str, args: tuple, kwargs: dict) -> None:
        if kind == "batch_isend_irecv":  # its P2POps' sends, read from the list it was given
            for op in (args[0] if args else kwargs.get("p2p_op_list", [])):
                if getattr(op.op, "counted_kind", getattr(op.op, "__name__", "")) in ("send", "isend"):
                    messages.append({"kind": "send", "peer": op.peer, "op": None, "data": op.tensor.detach().clone()})
            return
        tensor = _payload(kind, args, kwargs)
        if tensor is not None:
            messages.append({"kind": kind, "peer": _peer(args, kwargs) if kind == "send" else None,
                             "op": str(kwargs.get("op", args[1] if kind == "all_reduce" and len(args) > 1 else "")),
                             "data": tensor.detach().clone()})

    for name, kind in COUNTED.items():
        original = getattr(dist, name, None)
        if original is None:
            continue

        def counted(*args, _original=original, _kind=kind, **kwargs):
            if getattr(inside, "depth", 0):
                return _original(*args, **kwargs)
            counts[_kind] += 1
            if messages is not None:
                record(_kind, args, kwargs)
            inside.depth = 1
            try:
                return _original(*args, **kwargs)
            finally:
                inside.depth = 0

        counted.counted_kind = kind
        # c10d too: dist.P2POp checks its op against c10d's own isend and irecv
        owners = [dist, c10d] + [m for n, m in list(sys.modules.items())
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
