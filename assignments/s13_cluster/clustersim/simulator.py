"""Event-driven replay of a job trace through a policy, and its figures.

Events are arrivals and completions. At each event time t, in this order: every running job with
end == t completes (its slots are released), every job with arrival == t joins `pending`, the
policy's `schedule` runs once, then `observer(t, cluster)` is called (if given). The clock then
jumps to the next arrival or end time. Nothing happens between events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction

from .cluster import Cluster, ClusterSpec, Pods
from .jobs import Job
from .placement import place_gang
from .policies import SchedState


@dataclass(frozen=True)
class Segment:
    """One uninterrupted run of a job on `pods`, from `start` to `end`; `preempted` if it was cut
    short by a preemption (the work is lost), False if the job completed at `end`."""

    job_id: int
    start: float
    end: float
    pods: Pods
    preempted: bool


@dataclass(frozen=True)
class JobRecord:
    """start: the start of the job's last (completing) segment; end: its completion;
    wait = end - arrival - duration (all the time in the system not spent in the completing run);
    preemptions: how often it was preempted."""

    job_id: int
    arrival: float
    start: float
    end: float
    wait: float
    preemptions: int


@dataclass(frozen=True)
class SimResult:
    policy: str
    total_gpus: int
    records: tuple[JobRecord, ...]  # by job_id
    segments: tuple[Segment, ...]  # by (start, job_id)
    gpu_shares: tuple[tuple[int, Fraction], ...]  # job_id -> gpu_share, by job_id


@dataclass(frozen=True)
class Summary:
    """makespan = last end - first arrival (the horizon); utilisation = GPU-seconds busy (every
    segment's (end - start) * gpu_share, preempted ones included) / (total GPUs * makespan);
    mean_wait, max_wait over the jobs' waits; preemptions summed over the jobs."""

    makespan: float
    utilisation: float
    mean_wait: float
    max_wait: float
    preemptions: int


def simulate(spec: ClusterSpec, jobs: Iterable[Job], policy, observer: Callable[[float, Cluster], None] | None = None
             ) -> SimResult:
    """Replay `jobs` on an empty cluster of `spec` through `policy` (the module's event order) until
    every job has completed. ValueError for an empty trace, a repeated job_id, or a job whose gang
    does not fit even the empty cluster (it could never run); RuntimeError if jobs are pending while
    nothing runs and nothing is left to arrive (a policy that stalls)."""
    raise NotImplementedError("s13.19: simulate")


def summarize(result: SimResult) -> Summary:
    """The Summary of a run (definitions in Summary's docstring)."""
    raise NotImplementedError("s13.20: summarize")
