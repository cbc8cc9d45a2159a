"""Multi-rank tests: the `ranks` fixture starts one worker per rank, runs a test function on all of
them at once, and returns what each rank returned, by value.

    @pytest.mark.world_size(4)                  # gloo ranks on CPU; world_size(2, backend="nccl"): one GPU each
    def test_ring(ranks):
        outs = ranks.run(ring_on_rank, 1000)    # ring_on_rank(1000) runs on every rank, group joined
        assert all(torch.equal(o, expected) for o in outs)

Every rank is a worker of this judge like the test's single worker (the package loads only there,
each rank has the test's forbidden-API patches and accounting, seeded with the test's seed plus its
rank). A rank that raises, exits or hangs fails the test with a reason that names the rank and,
from the ranks' progress files, the collective each rank waits in. Whatever happens, every rank is
killed when the test ends, and so is anything a rank left running (the judge is a child subreaper:
orphans of the ranks become its children, and it kills every child it did not start for itself).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.judge.client import WorkerClient
from autograder.judge.forkserver import ForkServer
from autograder.judge.own_time import Deadline, clock
from autograder.judge.reaper import kill_strays
from autograder.protocol.messages import (
    ENV_DIST_BACKEND,
    ENV_DIST_TIMEOUT,
    ENV_PROGRESS,
    ENV_RANK,
    ENV_STORE,
    ENV_WORLD,
    Op,
)
from autograder.protocol.rules import AccountingRules, Ledger, verdict
from autograder.worker.ranks import private_folder
from autograder.worker.session import CALL_MARKER

MAX_GLOO_WORLD = 8          # CPU ranks share the grading machine's cores (2 on the course's CI); 6 to 8
                            # are for algorithms whose bugs show only there (a fold of several pairs)
GRACE_S = 3.0               # after one rank failed, how long the others get to finish or fail too
KILL_MARGIN_S = 5.0         # the judge's deadline ends this long before the test's timeout


def group_folder() -> Path:
    """A fresh folder for one group's store, progress files and private folders, in /tmp rather
    than the judge's TMPDIR: a confined rank reads everything beside the way to this folder, and
    the work dir (which it must list to import the package) must not be on that way."""
    try:
        return Path(tempfile.mkdtemp(prefix="ranks-", dir="/tmp"))
    except OSError:
        return Path(tempfile.mkdtemp(prefix="ranks-"))


class RankFailure(AssertionError):
    """A multi-rank run failed: the message names each rank's outcome and where it waited."""


@dataclass(frozen=True)
class Guards:
    """What each rank's worker enforces for one test, as the test's own worker does: the forbidden
    APIs, the op and kernel accounting rules, and the kernels the test requires."""

    nodeid: str
    forbidden: tuple[str, ...] = ()
    rules: AccountingRules = field(default_factory=AccountingRules)
    required: tuple[str, ...] = ()


class RankGroup:
    """`world` workers joined in one process group; `run` calls a test function on all of them."""

    def __init__(self, *, package: str, world: int, backend: str, timeout_s: float,
                 guards: Guards, spare_pid: int | None = None, forkserver: ForkServer | None = None) -> None:
        if world < 1:
            raise ValueError(f"world_size must be >= 1, got {world}")
        if backend not in ("gloo", "nccl"):
            raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
        if backend == "gloo" and world > MAX_GLOO_WORLD:
            raise ValueError(f"world_size({world}) on gloo: at most {MAX_GLOO_WORLD} CPU ranks per test")
        self.world, self.backend, self.timeout_s = world, backend, timeout_s
        self.spare_pid = spare_pid  # the test's own worker: closing the group must not kill it
        # One deadline for the whole test (start and every run together), from the group's creation
        # in the test's setup: a rank slow to start leaves less time to the runs, never more.
        # Counted in the test's own time, as its limit is (judge/own_time.py).
        self.deadline = Deadline(timeout_s - KILL_MARGIN_S, clock())
        self.nodeid, self.forbidden, self.rules, self.required = (guards.nodeid, list(guards.forbidden), guards.rules,
                                                                   guards.required)
        self.folder = group_folder()
        # The collective timeout fires before the judge's deadline, so a rank stuck in a collective
        # usually raises its own error (which names the collective) before it has to be killed.
        dist_timeout = max(2.0, min(30.0, 0.5 * (timeout_s - KILL_MARGIN_S)))
        self.clients = [WorkerClient(package, env={
            ENV_RANK: str(r), ENV_WORLD: str(world), ENV_STORE: str(self.folder / "store"),
            ENV_PROGRESS: str(self.progress_file(r)), ENV_DIST_BACKEND: backend,
            ENV_DIST_TIMEOUT: f"{dist_timeout:g}", "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1",
        } | self._own_folders(r)) for r in range(world)]
        self.forkserver = forkserver if backend == "gloo" else None  # CUDA ranks: never forked (see forkserver.py)
        for c in self.clients:
            c.share_rng = False  # each rank keeps its own stream (seeded with the test's seed + rank)
            c.forkserver = self.forkserver

    def _own_folders(self, rank: int) -> dict[str, str]:
        """The rank's HOME, TMPDIR and caches, in its private folder: the only place it may write
        (the rank confines itself to it once it has joined the group: worker/confine.py)."""
        own = private_folder(self.folder, rank)
        for sub in ("home", "tmp"):
            (own / sub).mkdir(parents=True, mode=0o700)
        return {"HOME": str(own / "home"), "TMPDIR": str(own / "tmp"), "TRITON_CACHE_DIR": str(own / "tmp" / "triton")}

    def progress_file(self, rank: int) -> Path:
        return self.folder / f"rank{rank}.progress"

    def where(self, rank: int) -> str:
        """What rank `rank` last reported doing (its progress file), or that it never got that far."""
        try:
            text = self.progress_file(rank).read_text(errors="replace").strip()
        except OSError:
            return "never started"
        return text or "never started"

    # ---- life cycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start every rank and wait until each has joined the group (all ranks start at once)."""
        for c in self.clients:
            c.start()
        errors = self._on_all(lambda c: c.ready(), self._left())
        if errors:
            self.close()
            raise RankFailure(self._describe("could not start", errors, self._stuck_ranks()))

    def close(self) -> None:
        """Kill every rank, anything they left behind, and the group's folder."""
        for c in self.clients:
            if c.proc is not None:
                try:
                    os.killpg(c.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for c in self.clients:
            c.kill()
        keep = {self.spare_pid, self.forkserver.pid if self.forkserver is not None else None} - {None}
        kill_strays(keep)  # type: ignore[arg-type]
        shutil.rmtree(self.folder, ignore_errors=True)

    # ---- running ------------------------------------------------------------------------------
    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        """fn(*args, **kwargs) on every rank at once (fn: a module-level function of a test file;
        in it, torch.distributed is initialised); each rank's return value, rank 0 first.
        RankFailure when a rank raised, exited, hung or failed its accounting."""
        return self._run(fn, [args] * self.world, kwargs)

    def run_each(self, fn: Callable[..., Any], inputs: list[Any], *args: Any, **kwargs: Any) -> list[Any]:
        """fn(inputs[rank], *args, **kwargs) on every rank at once: inputs[r] is sent to rank r
        only, so a value the judge drew for one rank is known to that rank and the judge alone
        (a test that checks what crossed in the messages draws each rank's input this way)."""
        if len(inputs) != self.world:
            raise ValueError(f"ranks.run_each: {len(inputs)} inputs for {self.world} ranks (one per rank)")
        return self._run(fn, [(value, *args) for value in inputs], kwargs)

    def _run(self, fn: Callable[..., Any], args_by_rank: list[tuple], kwargs: dict) -> list[Any]:
        fn = getattr(fn, "__wrapped__", fn)  # an in_worker function: ship the function itself
        if "<locals>" in fn.__qualname__:
            raise TypeError(f"ranks.run: {fn.__qualname__} must be defined at module level of a test file")
        target = (fn.__code__.co_filename, fn.__module__, fn.__qualname__)
        for c in self.clients:
            c.begin_test(self.nodeid, self.forbidden, self.rules.to_json(), list(self.required))
        results: list[Any] = [None] * self.world

        def call(rank: int, c: WorkerClient) -> None:
            results[rank] = c.request(Op.SHIPPED, *target, args_by_rank[rank], kwargs)

        errors = self._on_all(call, self._left(), with_rank=True)
        stuck = self._stuck_ranks()
        if errors or stuck:
            message = self._describe(f"ran {fn.__name__}", errors, stuck)
            self.close()
            raise RankFailure(message)
        if problems := self._accounting():
            raise RankFailure("; ".join(problems))
        return results

    def _left(self) -> float:
        """Seconds left before the test's deadline (at least a moment, so a late call still reports)."""
        return max(0.5, self.deadline.left())

    def _on_all(self, work: Callable[..., None], budget_s: float, with_rank: bool = False) -> dict[int, BaseException]:
        """Run work on every client in its own thread; stop waiting at the deadline, or GRACE_S
        after the first failure. Returns the exceptions by rank (threads still running are stuck)."""
        errors: dict[int, BaseException] = {}
        self._threads: dict[int, threading.Thread] = {}

        def body(rank: int, c: WorkerClient) -> None:
            try:
                work(rank, c) if with_rank else work(c)
            except BaseException as exc:  # noqa: BLE001  reported by rank
                errors[rank] = exc

        for rank, c in enumerate(self.clients):
            t = threading.Thread(target=body, args=(rank, c), daemon=True, name=f"rank{rank}")
            self._threads[rank] = t
            t.start()
        deadline, first_error = Deadline(budget_s, clock()), None
        while any(t.is_alive() for t in self._threads.values()):
            now = time.monotonic()
            if errors and first_error is None:
                first_error = now
            if deadline.left() <= 0 or (first_error is not None and now > first_error + GRACE_S):
                break
            for t in self._threads.values():
                t.join(timeout=0.05)
        return errors

    def _stuck_ranks(self) -> list[int]:
        return [r for r, t in getattr(self, "_threads", {}).items() if t.is_alive()]

    def _describe(self, what: str, errors: dict[int, BaseException], stuck: list[int]) -> str:
        lines = [f"{len(errors) + len(stuck)} of {self.world} ranks failed while the test {what}:"]
        # the failing ranks first: the report's one-line reason shows the head of this list
        for rank in sorted(range(self.world), key=lambda r: (r not in errors, r not in stuck, r)):
            if rank in errors:
                exc = errors[rank]
                lines.append(f"  rank {rank}: {type(exc).__name__}: {str(exc)[:400]} (last: {self.where(rank)})")
                if output := self.clients[rank].take_output().strip():
                    lines.append("    its output ends: " + output[-600:].replace("\n", "\n    "))
            elif rank in stuck:
                lines.append(f"  rank {rank}: still waiting after the others stopped, {self.where(rank)}")
            else:
                lines.append(f"  rank {rank}: finished ({self.where(rank)})")
        if stuck:
            lines.append("  A rank waiting in a collective or a recv the others never reach is the usual cause: "
                         "every rank must make the same collective calls in the same order, and each send "
                         "needs a matching recv.")
        return "\n".join(lines)

    def _accounting(self) -> list[str]:
        """Each rank's accounting verdict for the run (the ledger of each rank, judged here)."""
        problems = []
        for rank, c in enumerate(self.clients):
            served, data = c.end_test()
            if not (self.rules.active or self.required) or not served:
                continue
            try:
                ledger = Ledger.from_json(data)
            except ValueError as exc:
                problems.append(f"rank {rank}: the op and kernel accounting sent no valid ledger ({exc})")
                continue
            if self.rules.records_ops and ledger.ops.get(CALL_MARKER, 0) != c.calls:
                why = (f"the op accounting saw {ledger.ops.get(CALL_MARKER, 0)} of the {c.calls} calls into the "
                       "submission (switched off or tampered with)")
            else:
                why = verdict(ledger, self.rules, self.required, calls=c.calls)
            if why:
                problems.append(f"rank {rank}: {why}")
        return problems
