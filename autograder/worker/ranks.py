"""One rank of a multi-rank test, as its worker process sees it.

The judge starts one worker per rank with the rank's coordinates in the environment (see
`autograder.protocol.messages`). Before the conftest or the package load, this module:
- records where the rank is: every call into torch.distributed's collectives and point-to-point
  functions writes "<op> #<n> (<peer>) entered/returned" to the rank's progress file, so when a test
  hangs the judge can say which rank waits in which call (the file is a diagnosis, never a grade);
- joins the process group: gloo (CPU) or NCCL (one GPU per rank), rendezvous through a file store
  in the test's private folder (no port to choose, none to clash between runs), gloo on loopback
  only, and a collective timeout shorter than the test's, so a rank stuck in a collective raises
  its own error naming the collective before the judge has to kill it;
- confines itself to its own files (`autograder.worker.confine`): its private folder (HOME and
  TMPDIR, set by the judge) and the store file, so no file can carry one rank's input to another.
"""

from __future__ import annotations

import datetime
import functools
import os
from pathlib import Path
from typing import Any

from autograder.protocol.messages import (
    ENV_DIST_BACKEND,
    ENV_DIST_TIMEOUT,
    ENV_PROGRESS,
    ENV_RANK,
    ENV_STORE,
    ENV_WORLD,
)

# The calls a rank can wait in: collectives and point-to-point, as torch.distributed exports them.
WATCHED = ("send", "recv", "isend", "irecv", "batch_isend_irecv", "broadcast", "all_reduce", "reduce",
           "all_gather", "all_gather_into_tensor", "all_gather_object", "gather", "scatter", "reduce_scatter",
           "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier", "monitored_barrier",
           "broadcast_object_list")
PEER_KEYS = ("dst", "src", "group_dst", "group_src")


def private_folder(group_folder: str | Path, rank: int) -> Path:
    """Rank `rank`'s own folder in the group's folder: its HOME and TMPDIR live in it."""
    return Path(group_folder) / f"rank{rank}"


def rank_of_this_process() -> int | None:
    """This worker's rank, or None for the test's single worker."""
    value = os.environ.get(ENV_RANK)
    return int(value) if value is not None else None


class Progress:
    """The rank's progress file: one line, rewritten in place at every watched call."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.count = 0
        self.depth = 0  # watched calls open now: torch's recv calls its irecv, and the outer one is where it waits

    def write(self, text: str) -> None:
        data = text.encode()[:500].ljust(512)
        os.pwrite(self._fd, data, 0)


def _peer(args: tuple, kwargs: dict) -> str:
    for key in PEER_KEYS:
        if kwargs.get(key) is not None:
            return f"{key}={kwargs[key]}"
    return ""


def _watch(name: str, fn: Any, progress: Progress) -> Any:
    @functools.wraps(fn)
    def watched(*args: Any, **kwargs: Any) -> Any:
        if progress.depth:  # inside another watched call (recv -> irecv): that one says where we are
            return fn(*args, **kwargs)
        progress.count += 1
        peer = _peer(args, kwargs)
        if not peer and name in ("send", "isend") and len(args) > 1:
            peer = f"dst={args[1]}"
        elif not peer and name in ("recv", "irecv") and len(args) > 1:
            peer = f"src={args[1]}"
        where = f"{name} #{progress.count}" + (f" ({peer})" if peer else "")
        progress.write(f"in {where}")
        progress.depth += 1
        try:
            result = fn(*args, **kwargs)
        finally:
            progress.depth -= 1
        progress.write(f"returned from {where}")
        return result

    return watched


def join_from_env() -> None:
    """Watch the collectives and join the process group when this worker is a rank (else nothing)."""
    rank = rank_of_this_process()
    if rank is None:
        return
    import torch
    import torch.distributed as dist

    world = int(os.environ[ENV_WORLD])
    progress = Progress(os.environ[ENV_PROGRESS])
    progress.write("starting")
    from torch.distributed import distributed_c10d

    for name in WATCHED:
        original = getattr(dist, name, None)
        if original is None:
            continue
        watched = _watch(name, original, progress)
        setattr(dist, name, watched)
        if getattr(distributed_c10d, name, None) is original:  # one object under both names: P2POp checks
            setattr(distributed_c10d, name, watched)          # `op in [isend, irecv]` against c10d's own
    backend = os.environ.get(ENV_DIST_BACKEND, "gloo")
    if backend == "nccl":
        torch.cuda.set_device(rank)
    timeout = datetime.timedelta(seconds=float(os.environ.get(ENV_DIST_TIMEOUT, "30")))
    store = dist.FileStore(os.environ[ENV_STORE], world)
    progress.write("in init_process_group")
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
    from autograder.worker.confine import confine

    group_folder = os.path.dirname(os.environ[ENV_STORE])
    done = confine(group_folder=group_folder, own_folder=str(private_folder(group_folder, rank)),
                   store_file=os.environ[ENV_STORE], nccl=backend == "nccl")
    confined = f"confined by Landlock ABI {done.abi}" if done.abi else done.note
    progress.write(f"ready (process group joined; {confined})")
