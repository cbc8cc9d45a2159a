"""Priority scheduling with per-queue quotas and preemption, in the manner of Kueue.

Each queue has a nominal quota of GPUs; a queue's *usage* is the gpu_share of its running jobs,
summed over the queue (not per job). A queue whose usage exceeds its nominal quota is *borrowing*.

One pass (the rule the tests hold you to):
- Pending jobs are taken one at a time in order of (priority descending, arrival, job_id), each job
  at most once per pass (a job preempted during the pass joins the pending jobs not yet taken).
- A job that fits the free GPUs starts, even beyond its queue's quota (borrowing).
- Otherwise it may start by preemption, choosing victims greedily among the running jobs in order
  of (priority ascending, start time descending, job_id descending). A running job V is eligible
  when it is in the job's own queue with a strictly lower priority, or when it is in another queue
  that is borrowing at that point (usage after the victims chosen so far are removed > nominal),
  whatever its priority. A job started in this pass (start == now) is never a victim. After each
  victim is added, stop as soon as both hold: the gang fits the GPUs the victims free, and the
  job's queue is within quota with it: usage (less its victims) + the job's gpu_share <= nominal.
  If no prefix of the eligible victims achieves that, nobody is preempted and the job waits.
  Victims restart from scratch later.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

from .jobs import Job
from .placement import place_gang
from .policies import SchedState


def queue_usage(state: SchedState) -> dict[str, Fraction]:
    """queue -> summed gpu_share of that queue's running jobs (queues with none are absent)."""
    raise NotImplementedError("s13.16: queue_usage")


def choose_victims(state: SchedState, job: Job, quotas: dict[str, int]) -> list[int] | None:
    """The victims (job ids, in the order chosen) that let pending `job` start under the module's
    rule, or None if no eligible set does. Changes nothing (the caller preempts them)."""
    raise NotImplementedError("s13.17: choose_victims")


class PriorityQuotaPolicy:
    """Priority order with per-queue nominal quotas, borrowing and preemption (module docstring).
    `quotas`: queue -> nominal GPUs (an int >= 0); a queue not listed has quota 0."""

    name = "priority_quota"

    def __init__(self, quotas: dict[str, int]) -> None:
        for queue, nominal in quotas.items():
            if not isinstance(nominal, int) or nominal < 0:
                raise ValueError(f"quota of queue {queue!r} must be an int >= 0, got {nominal!r}")
        self.quotas = dict(quotas)

    def schedule(self, state: SchedState) -> None:
        raise NotImplementedError("s13.18: PriorityQuotaPolicy.schedule")
