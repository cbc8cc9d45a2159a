"""A test's own time: wall time less the time its processes were ready to run but waited for a CPU.

A limit on the wall clock makes a grade depend on the neighbours: on a host loaded three times over
(`grade-class -j N`, a CI machine running other gradings), a correct submission gets a third of a
core and runs out of time. Linux keeps, for every thread, the time it spent waiting on a run queue
(the second field of /proc/<pid>/schedstat); subtracted from the wall clock, what is left is the
time the test would have taken alone. A test that sleeps or blocks (a hang) never waits on a run
queue, so its own time is its wall time and a hang is caught as fast as on an idle host.

Watched: the judge's main thread and the main thread of every worker the judge starts (a test's
worker, each rank's). Ranks waiting side by side add up, which makes a loaded multi-rank test's
allowance generous; the cap holds it: a test never runs longer than MAX_STRETCH times its limit on
the wall clock. Where the kernel keeps no schedstat (a gVisor host) own time is wall time.

The numbers are read by the judge from /proc, outside the submission's process: a submission that
loads the host itself only slows itself, and gains at most the cap on a time limit, never a point
(perf is graded as same-run ratios against the judge's bracket).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from autograder.protocol.run import MAX_STRETCH  # a limit of T s of own time ends by MAX_STRETCH * T on the wall

SAMPLE_S = 0.25     # how often the watched threads' run-queue waits are read (a worker that dies keeps
                    # what was read of it: at most one interval is lost)


def run_delay_s(pid: int) -> float | None:
    """Seconds the thread `pid` has waited on a run queue since it started; None when it is gone or
    the kernel keeps no such count."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class OwnTime:
    """The run-queue waits of the watched threads, read by a sampler thread; `now()` is a clock that
    stops while they wait. Readers never take a lock (the SIGALRM handler reads it in the middle of
    anything): the sampler alone writes `waited`, a float replaced whole."""

    def __init__(self, read: Callable[[int], float | None] = run_delay_s, sample_s: float = SAMPLE_S) -> None:
        self.read, self.sample_s = read, sample_s
        self._first: dict[int, float] = {}  # pid -> its wait when first watched
        self._last: dict[int, float] = {}   # pid -> its wait at the latest read
        self._gone = 0.0                    # what the processes gone since waited while watched
        self.waited = 0.0
        self._thread: threading.Thread | None = None

    def watch(self, pid: int) -> None:
        """Count `pid`'s waits from now on (a pid the kernel keeps no count for is ignored)."""
        first = self.read(pid)
        if first is None:
            return
        self._last[pid] = self._first[pid] = first
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="own-time", daemon=True)
            self._thread.start()

    def sample(self) -> float:
        """Read every watched thread once; the total wait since each was first watched."""
        for pid in list(self._first):
            now = self.read(pid)
            if now is None:  # gone: keep what it had waited at the last read
                self._gone += self._last.pop(pid, 0.0) - self._first.pop(pid, 0.0)
            else:
                self._last[pid] = now
        self.waited = self._gone + sum(self._last[p] - self._first[p] for p in list(self._first) if p in self._last)
        return self.waited

    def _run(self) -> None:
        while True:
            time.sleep(self.sample_s)
            self.sample()

    def now(self) -> float:
        """A monotonic clock less the watched threads' waits (stale by at most one sample)."""
        return time.monotonic() - self.waited


class Deadline:
    """`limit_s` seconds of own time from now, and never more than MAX_STRETCH * limit_s of wall."""

    def __init__(self, limit_s: float, clock: OwnTime) -> None:
        self.limit_s, self.clock = limit_s, clock
        self.wall0, self.own0 = time.monotonic(), clock.now()

    def used(self) -> tuple[float, float]:
        """(own seconds counted against the limit, wall seconds) since the start."""
        wall = time.monotonic() - self.wall0
        return max(self.clock.now() - self.own0, wall / MAX_STRETCH), wall

    def left(self) -> float:
        """Own seconds left; the wall time left is at least as long."""
        return self.limit_s - self.used()[0]


_CLOCK: OwnTime | None = None


def clock() -> OwnTime:
    """This judge's clock, watching its own main thread from the first call."""
    global _CLOCK
    if _CLOCK is None:
        _CLOCK = OwnTime()
        _CLOCK.watch(os.getpid())
    return _CLOCK
