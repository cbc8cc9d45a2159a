"""Plain pytest in an assignment folder: the student's quick loop, never a grade.

`python -m pytest tests` inside an assignment runs the public tests in one process with the
package imported directly (no judge, no worker, no accounting, no points). This module gives
such a run what the graded run's plugin gives a test: GPU tests skip without a GPU, `ranks`
starts real gloo ranks (spawned processes, one process group), `perf` records to the output.
It is registered by the `pytest11` entry point with the course's marks (autograder/marks.py) and
stays out of a graded run (the judge started with `--ag-run`), whose plugin owns these fixtures.
"""

from __future__ import annotations

import os
import pickle
import queue
import tempfile
from collections.abc import Callable
from typing import Any

import pytest

RANK_TIMEOUT_S = 120.0


def graded(config: pytest.Config) -> bool:
    """Whether this pytest run is a graded one (the judge's plugin, with a package to grade)."""
    return bool(getattr(config.known_args_namespace, "ag_run", None))


class LocalRun:
    """The fixtures and skips of a quick loop (registered only when the run is not graded)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.get_closest_marker("gpu") is not None and not _cuda_devices():
            pytest.skip("needs a CUDA GPU (graded on the course's GPU runner)")
        mark = item.get_closest_marker("world_size")
        if mark is not None and _backend(mark) == "nccl" and _cuda_devices() < _world(mark):
            pytest.skip(f"needs {_world(mark)} CUDA GPUs (one per rank)")

    @pytest.fixture
    def ranks(self, request: pytest.FixtureRequest) -> LocalRanks:
        mark = request.node.get_closest_marker("world_size")
        if mark is None:
            raise pytest.UsageError(f"{request.node.nodeid}: the ranks fixture needs @pytest.mark.world_size(n)")
        return LocalRanks(_world(mark), _backend(mark))

    @pytest.fixture
    def perf(self) -> LocalPerf:
        return LocalPerf()


class LocalRanks:
    """`run(fn, *args)`: fn on `world` spawned processes that joined one process group; each
    rank's return value, rank 0 first (fn: a module-level function of a test file)."""

    def __init__(self, world: int, backend: str) -> None:
        self.world, self.backend = world, backend

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        return self._run(fn, [args] * self.world, kwargs)

    def run_each(self, fn: Callable[..., Any], inputs: list[Any], *args: Any, **kwargs: Any) -> list[Any]:
        if len(inputs) != self.world:
            raise ValueError(f"ranks.run_each: {len(inputs)} inputs for {self.world} ranks (one per rank)")
        return self._run(fn, [(value, *args) for value in inputs], kwargs)

    def _run(self, fn: Callable[..., Any], args_by_rank: list[tuple], kwargs: dict) -> list[Any]:
        import torch.multiprocessing as mp

        fn = getattr(fn, "__wrapped__", fn)  # an in_worker function: the function itself
        ctx = mp.get_context("spawn")
        results = ctx.Queue()
        with tempfile.TemporaryDirectory() as folder:
            store = os.path.join(folder, "store")
            procs = [ctx.Process(target=_rank_main, args=(rank, self.world, self.backend, store, fn,
                                                          args_by_rank[rank], kwargs, results))
                     for rank in range(self.world)]
            for p in procs:
                p.start()
            got: dict[int, tuple[str, Any]] = {}
            try:
                for _ in procs:
                    rank, outcome, value = pickle.loads(results.get(timeout=RANK_TIMEOUT_S))
                    got[rank] = (outcome, value)
            except queue.Empty:  # a rank died or hung: named below
                pass
            finally:
                for p in procs:
                    p.join(timeout=5)
                    if p.is_alive():
                        p.kill()
        missing = [r for r in range(self.world) if r not in got]
        if missing:
            raise RuntimeError(f"ranks {missing} of {self.world} returned nothing in {RANK_TIMEOUT_S:.0f} s "
                               "(exited or hung in a collective)")
        failed = {r: v for r, (o, v) in got.items() if o == "raised"}
        if failed:
            raise RuntimeError("; ".join(f"rank {r} raised {v}" for r, v in sorted(failed.items())))
        return [got[r][1] for r in range(self.world)]


def _rank_main(rank: int, world: int, backend: str, store: str, fn: Callable[..., Any], args: tuple,
               kwargs: dict, results: Any) -> None:
    """One rank: join the group (seeded with its rank, as graded ranks are), run fn, send its value."""
    import datetime
    import traceback

    import torch
    import torch.distributed as dist

    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        torch.manual_seed(rank)
        dist.init_process_group(backend, store=dist.FileStore(store, world), rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=RANK_TIMEOUT_S))
        # pickled here, tensors by value: a tensor sent through the queue itself lives in this
        # process's shared memory, gone once it exits
        results.put(pickle.dumps((rank, "returned", fn(*args, **kwargs))))
    except BaseException as exc:  # noqa: BLE001  the test reports it, naming the rank
        results.put(pickle.dumps((rank, "raised", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


class LocalPerf:
    """`record` prints the metric (no thresholds here: perf is graded on the course's runners)."""

    def record(self, name: str, value: float) -> None:
        print(f"[perf] {name} = {float(value):.4g}")

    def attach(self, name: str, figure: Any) -> None:
        print(f"[perf] figure {name!r} (kept only in a graded run)")


def _cuda_devices() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _world(mark: pytest.Mark) -> int:
    return int(mark.args[0] if mark.args else mark.kwargs.get("n", 1))


def _backend(mark: pytest.Mark) -> str:
    return str(mark.args[1] if len(mark.args) > 1 else mark.kwargs.get("backend", "gloo"))
