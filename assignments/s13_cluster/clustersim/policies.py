"""The scheduler's state during a pass, and two queue policies: strict FIFO and EASY backfill.

A policy's `schedule(state)` runs once per event time, after that time's completions and
arrivals; it starts jobs (`state.start`) and may preempt running ones (`state.preempt`).
`state.pending` is kept in (arrival, job_id) order.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from .cluster import Cluster, Pods
from .jobs import Job
from .placement import place_gang


@dataclass
class Run:
    """A running job: started at `start`, ends at `end` = start + duration, holding `pods`."""

    job: Job
    start: float
    end: float
    pods: Pods


class SchedState:
    """What a policy sees and changes: the cluster, the clock, pending and running jobs."""

    def __init__(self, cluster: Cluster, now: float = 0.0) -> None:
        self.cluster = cluster
        self.now = now
        self.pending: list[Job] = []  # (arrival, job_id) order
        self.running: dict[int, Run] = {}  # job_id -> Run
        self.events: list[tuple[str, float, int]] = []  # ("start" | "preempt", time, job_id)

    def add_pending(self, job: Job) -> None:
        """Insert `job` into `pending` at its (arrival, job_id) position."""
        keys = [(j.arrival, j.job_id) for j in self.pending]
        self.pending.insert(bisect.bisect(keys, (job.arrival, job.job_id)), job)

    def ends(self) -> dict[int, float]:
        """job_id -> end time of every running job."""
        return {job_id: run.end for job_id, run in self.running.items()}

    def start(self, job: Job, pods: Pods) -> None:
        """Start pending `job` now on `pods`: bind them (all or nothing), move the job from pending
        to running (ending at now + duration) and log ("start", now, job_id)."""
        raise NotImplementedError("s13.11: SchedState.start")

    def preempt(self, job_id: int) -> None:
        """Stop running job `job_id` now: free its slots, put it back in pending at its original
        (arrival, job_id) position (it will restart from scratch), log ("preempt", now, job_id)."""
        raise NotImplementedError("s13.12: SchedState.preempt")


def reservation_time(cluster: Cluster, ends: dict[int, float], job: Job, now: float) -> float:
    """The earliest time at which `job`'s gang fits if nothing new starts: `now` if it fits now;
    otherwise release the running jobs in order of their end times (all jobs ending at the same
    time together; `ends`: job_id -> end) on a copy of the cluster and return the first end time
    after which place_gang succeeds; math.inf if it never does. The cluster is not changed."""
    raise NotImplementedError("s13.13: reservation_time")


class FifoPolicy:
    """Strict first come, first served: start pending jobs in (arrival, job_id) order while each
    fits; stop at the first that does not (nothing behind it may start). Ignores priority and
    quotas; never preempts."""

    name = "fifo"

    def schedule(self, state: SchedState) -> None:
        raise NotImplementedError("s13.14: FifoPolicy.schedule")


class EasyBackfillPolicy:
    """EASY backfill: FIFO while the head fits. When the head (first pending job) does not fit, it
    gets a reservation S = reservation_time(...) on the state as it is then. Each later pending job,
    in order, starts now if it fits now and the head's reservation time recomputed with that job
    also running (from now to now + duration, on the GPUs place_gang gives it) is still <= S;
    otherwise it is skipped. Durations are known exactly. Never preempts."""

    name = "easy_backfill"

    def schedule(self, state: SchedState) -> None:
        raise NotImplementedError("s13.15: EasyBackfillPolicy.schedule")
