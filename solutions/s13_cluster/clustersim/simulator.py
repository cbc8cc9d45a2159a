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
    # BEGIN SOLUTION
    jobs = sorted(jobs, key=lambda j: (j.arrival, j.job_id))
    if not jobs:
        raise ValueError("an empty trace")
    if len({j.job_id for j in jobs}) != len(jobs):
        raise ValueError("job ids must be unique")
    empty = Cluster(spec)
    for job in jobs:
        if place_gang(empty, job) is None:
            raise ValueError(f"job {job.job_id} does not fit even the empty cluster")
    state = SchedState(Cluster(spec), jobs[0].arrival)
    segments: list[Segment] = []
    ends: dict[int, float] = {}
    preemptions = {j.job_id: 0 for j in jobs}
    i, seen = 0, 0
    while True:
        now = state.now
        for job_id in sorted(j for j, r in state.running.items() if r.end == now):
            run = state.running.pop(job_id)
            state.cluster.release(job_id)
            segments.append(Segment(job_id, run.start, now, run.pods, False))
            ends[job_id] = now
        while i < len(jobs) and jobs[i].arrival == now:
            state.add_pending(jobs[i])
            i += 1
        before = dict(state.running)
        policy.schedule(state)
        for kind, t, job_id in state.events[seen:]:
            if kind == "preempt":
                preemptions[job_id] += 1
                run = before.pop(job_id)
                segments.append(Segment(job_id, run.start, t, run.pods, True))
        seen = len(state.events)
        if observer is not None:
            observer(now, state.cluster)
        upcoming = [r.end for r in state.running.values()] + ([jobs[i].arrival] if i < len(jobs) else [])
        if not upcoming:
            if state.pending:
                raise RuntimeError(f"jobs {[j.job_id for j in state.pending]} pending with nothing running")
            break
        state.now = min(upcoming)
    records = tuple(JobRecord(j.job_id, j.arrival, ends[j.job_id] - j.duration, ends[j.job_id],
                              ends[j.job_id] - j.arrival - j.duration, preemptions[j.job_id])
                    for j in sorted(jobs, key=lambda j: j.job_id))
    return SimResult(getattr(policy, "name", type(policy).__name__), spec.total_gpus, records,
                     tuple(sorted(segments, key=lambda s: (s.start, s.job_id))),
                     tuple((j.job_id, j.gpu_share) for j in sorted(jobs, key=lambda j: j.job_id)))
    # END SOLUTION


def summarize(result: SimResult) -> Summary:
    """The Summary of a run (definitions in Summary's docstring)."""
    # BEGIN SOLUTION
    first = min(r.arrival for r in result.records)
    last = max(r.end for r in result.records)
    makespan = last - first
    share = dict(result.gpu_shares)
    busy = sum(float((s.end - s.start) * share[s.job_id]) for s in result.segments)
    waits = [r.wait for r in result.records]
    return Summary(makespan, busy / (result.total_gpus * makespan) if makespan > 0 else 0.0,
                   sum(waits) / len(waits), max(waits), sum(r.preemptions for r in result.records))
    # END SOLUTION
