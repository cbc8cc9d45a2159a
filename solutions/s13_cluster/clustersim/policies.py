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
        # BEGIN SOLUTION
        self.cluster.bind(job.job_id, pods)
        self.pending.remove(job)
        self.running[job.job_id] = Run(job, self.now, self.now + job.duration, pods)
        self.events.append(("start", self.now, job.job_id))
        # END SOLUTION

    def preempt(self, job_id: int) -> None:
        """Stop running job `job_id` now: free its slots, put it back in pending at its original
        (arrival, job_id) position (it will restart from scratch), log ("preempt", now, job_id)."""
        # BEGIN SOLUTION
        run = self.running.pop(job_id)
        self.cluster.release(job_id)
        self.add_pending(run.job)
        self.events.append(("preempt", self.now, job_id))
        # END SOLUTION


def reservation_time(cluster: Cluster, ends: dict[int, float], job: Job, now: float) -> float:
    """The earliest time at which `job`'s gang fits if nothing new starts: `now` if it fits now;
    otherwise release the running jobs in order of their end times (all jobs ending at the same
    time together; `ends`: job_id -> end) on a copy of the cluster and return the first end time
    after which place_gang succeeds; math.inf if it never does. The cluster is not changed."""
    # BEGIN SOLUTION
    if place_gang(cluster, job) is not None:
        return now
    work = cluster.copy()
    for t in sorted(set(ends.values())):
        for job_id in sorted(j for j, end in ends.items() if end == t):
            work.release(job_id)
        if place_gang(work, job) is not None:
            return t
    return math.inf
    # END SOLUTION


class FifoPolicy:
    """Strict first come, first served: start pending jobs in (arrival, job_id) order while each
    fits; stop at the first that does not (nothing behind it may start). Ignores priority and
    quotas; never preempts."""

    name = "fifo"

    def schedule(self, state: SchedState) -> None:
        # BEGIN SOLUTION
        for job in list(state.pending):
            pods = place_gang(state.cluster, job)
            if pods is None:
                return
            state.start(job, pods)
        # END SOLUTION


class EasyBackfillPolicy:
    """EASY backfill: FIFO while the head fits. When the head (first pending job) does not fit, it
    gets a reservation S = reservation_time(...) on the state as it is then. Each later pending job,
    in order, starts now if it fits now and the head's reservation time recomputed with that job
    also running (from now to now + duration, on the GPUs place_gang gives it) is still <= S;
    otherwise it is skipped. Durations are known exactly. Never preempts."""

    name = "easy_backfill"

    def schedule(self, state: SchedState) -> None:
        # BEGIN SOLUTION
        queue = list(state.pending)
        i = 0
        while i < len(queue):
            pods = place_gang(state.cluster, queue[i])
            if pods is None:
                break
            state.start(queue[i], pods)
            i += 1
        if i == len(queue):
            return
        head = queue[i]
        shadow = reservation_time(state.cluster, state.ends(), head, state.now)
        for job in queue[i + 1 :]:
            pods = place_gang(state.cluster, job)
            if pods is None:
                continue
            trial = state.cluster.copy()
            trial.bind(job.job_id, pods)
            ends = state.ends() | {job.job_id: state.now + job.duration}
            if reservation_time(trial, ends, head, state.now) <= shadow:
                state.start(job, pods)
        # END SOLUTION
