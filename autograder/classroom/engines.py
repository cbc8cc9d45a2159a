"""Where a class's gradings run: a pool of processes on this machine (`local`) or the tasks of a
Ray cluster (`ray`), behind one small interface.

An engine takes a picklable function and its picklable tasks and yields each (task, result or
exception) as soon as that grading finished, in finishing order. It never touches the gradebook:
the caller (this process) stays its only writer and records each grading as it is yielded, so a
killed driver loses nothing recorded whichever engine ran the gradings. What a grading reads
(course, submission) and writes (its results file) travels as paths: on a cluster, they must name
the same files on every node (shared storage).
"""

from __future__ import annotations

import ipaddress
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

from autograder.errors import GraderError

ENGINES = ("local", "ray")
RAY_MISSING = "--engine ray needs Ray, which is not installed here: pip install -e .[cluster]"
# Ray takes this machine's routed address as its node address, unless told it runs on one machine
# only (the switch is named for macOS and Windows, where that is the default); then every Ray
# service listens on 127.0.0.1 and a driver finds a raylet started on loopback.
RAY_ONE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

Outcome = tuple[Any, Any | BaseException]  # (task, what the function returned, or the exception it raised)


class Engine(Protocol):
    def run(self, work: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Outcome]:
        """Run work(task) for every task; yield each outcome as it finishes."""
        ...


@dataclass(frozen=True)
class LocalEngine:
    """`jobs` worker processes of this machine."""

    jobs: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.jobs, int) or self.jobs < 1:
            raise ValueError(f"jobs must be a whole number >= 1, got {self.jobs!r}")

    def run(self, work: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Outcome]:
        if not tasks:
            return
        # spawn, not fork: the caller holds an open database and threads; a forked copy of either is unsafe
        context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(tasks)), mp_context=context)
        try:
            pending: dict[Future, Any] = {pool.submit(work, task): task for task in tasks}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    task = pending.pop(future)
                    error = future.exception()
                    yield task, (error if error is not None else future.result())
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)  # nothing unfinished is handed back
            raise
        pool.shutdown()


@dataclass(frozen=True)
class RayEngine:
    """One Ray task per grading, on the cluster at `address` (None: $RAY_ADDRESS, or else a new Ray
    instance of this machine for this run, listening on loopback only)."""

    address: str | None = None
    gpus: int = 0          # GPUs each grading asks for: Ray places it on a node that has them free
    max_retries: int = 2   # a grading lost with its node runs again elsewhere (it records nothing itself)

    def __post_init__(self) -> None:
        if self.address is not None and not self.address.strip():
            raise ValueError("--ray-address must not be empty")
        if self.gpus not in (0, 1):
            raise ValueError(f"a grading uses 0 or 1 GPU, got {self.gpus!r}")

    def run(self, work: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Outcome]:
        if not tasks:
            return
        ray, owned = _connect(self.address)
        remote = ray.remote(work).options(num_cpus=1, num_gpus=self.gpus, max_retries=self.max_retries)
        pending = {remote.remote(task): task for task in tasks}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    yield pending.pop(ref), _result(ray, ref)
        finally:
            for ref in pending:  # the driver stops (an error, Ctrl-C): nothing unfinished is recorded
                ray.cancel(ref, force=True)
            if owned:
                ray.shutdown()


def jobs_this_host_holds(jobs: int, cpus: int | None = None) -> tuple[int, str | None]:
    """At most one grading per core at once, and why when fewer than asked. Each grading is at least
    one busy process; its time limits count its own time, but only up to MAX_STRETCH times the limit
    on the wall clock (judge/own_time.py), so more gradings than cores would let neighbours cost a
    correct submission its tests again."""
    cpus = cpus or os.cpu_count() or 1
    if jobs <= cpus:
        return jobs, None
    return cpus, (f"-j {jobs} is more than this machine's {cpus} cores: grading {cpus} at once, so that no "
                  "submission runs out of time because of its neighbours")


def make_engine(*, engine: str, jobs: int, ray_address: str | None, gpus: int) -> Engine:
    """The engine named `engine`; a clear GraderError when Ray is asked for and not installed."""
    if engine == "local":
        return LocalEngine(jobs)
    if engine == "ray":
        _require_ray()
        return RayEngine(ray_address, gpus)
    raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")


def _require_ray() -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise GraderError(RAY_MISSING)


def _connect(address: str | None) -> tuple[Any, bool]:
    """Import Ray (told first whether it runs on loopback: it reads that once, at import) and join
    the cluster as its driver; whether this call joined (and so must leave)."""
    # "local": a new instance for this command, never one some other `ray start` left on this machine
    address = address or os.environ.get("RAY_ADDRESS") or "local"
    if _is_loopback(address):
        os.environ.setdefault(RAY_ONE_MACHINE, "0")
    import ray

    if ray.is_initialized():
        return ray, False
    # no dashboard: nothing to serve, and one service fewer listening; task output stays in Ray's logs
    ray.init(address=address, include_dashboard=False, log_to_driver=False)
    return ray, True


def _is_loopback(address: str) -> bool:
    """A new instance of this machine ("local"), or an address on 127.0.0.0/8."""
    if address in ("local", "localhost"):
        return True
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: a real cluster


def _result(ray: Any, ref: Any) -> Any | BaseException:
    """The task's return value, or the exception that ended it (the grader's own, not Ray's wrapper)."""
    try:
        return ray.get(ref)
    except Exception as error:  # noqa: BLE001 - handed back to the caller, who reports it
        return getattr(error, "cause", None) or error
