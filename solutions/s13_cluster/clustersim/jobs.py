"""Jobs of a trace: a gang of pods, each pod a TP group of whole GPUs or one MIG instance."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .mig import NUM_COMPUTE_SLICES, h200_profiles

TP_SCOPES = ("island", "node", "any")


@dataclass(frozen=True)
class Job:
    """One trace record.

    job_id: unique int; arrival, duration: seconds (arrival >= 0, duration > 0, finite);
    priority: larger is more important; queue: the tenant's queue (quota holder);
    pods: gang size (all pods run or none); gpus_per_pod: whole GPUs per pod (its TP group);
    mig_profile: if set, each pod is one MIG instance of this H200 profile instead (gpus_per_pod
    must then be 1); tp_scope: where a pod's GPUs must lie: "island" (one NVLink island), "node"
    (one node) or "any" (anywhere). Raises ValueError on anything else.
    """

    job_id: int
    arrival: float
    duration: float
    pods: int = 1
    gpus_per_pod: int = 1
    priority: int = 0
    queue: str = "default"
    mig_profile: str | None = None
    tp_scope: str = "island"

    def __post_init__(self) -> None:
        if not isinstance(self.job_id, int):
            raise ValueError(f"job_id must be an int, got {self.job_id!r}")  # noqa: TRY004  (a config error: ValueError throughout)
        if not (math.isfinite(self.arrival) and self.arrival >= 0):
            raise ValueError(f"job {self.job_id}: arrival must be finite and >= 0, got {self.arrival}")
        if not (math.isfinite(self.duration) and self.duration > 0):
            raise ValueError(f"job {self.job_id}: duration must be finite and > 0, got {self.duration}")
        if not isinstance(self.pods, int) or self.pods < 1:
            raise ValueError(f"job {self.job_id}: pods must be an int >= 1, got {self.pods!r}")
        if not isinstance(self.gpus_per_pod, int) or self.gpus_per_pod < 1:
            raise ValueError(f"job {self.job_id}: gpus_per_pod must be an int >= 1, got {self.gpus_per_pod!r}")
        if self.tp_scope not in TP_SCOPES:
            raise ValueError(f"job {self.job_id}: tp_scope must be one of {TP_SCOPES}, got {self.tp_scope!r}")
        if self.mig_profile is not None:
            if self.mig_profile not in h200_profiles():
                raise ValueError(f"job {self.job_id}: unknown MIG profile {self.mig_profile!r}")
            if self.gpus_per_pod != 1:
                raise ValueError(f"job {self.job_id}: a MIG pod is one instance (gpus_per_pod must be 1)")

    @property
    def gpu_share(self) -> Fraction:
        """The GPUs the job holds, for quotas and utilisation: pods * gpus_per_pod for whole GPUs;
        pods * (compute slices of the profile) / 7 for MIG (a 3g instance is 3/7 of a GPU)."""
        if self.mig_profile is None:
            return Fraction(self.pods * self.gpus_per_pod)
        return Fraction(self.pods * h200_profiles()[self.mig_profile].compute_slices, NUM_COMPUTE_SLICES)


def jobs_from_rows(rows: list[dict]) -> list[Job]:
    """Jobs from plain dicts with Job's field names (a JSON trace); ValueError for a repeated
    job_id or an unknown field."""
    jobs, seen = [], set()
    for row in rows:
        unknown = set(row) - set(Job.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown job fields {sorted(unknown)}")
        job = Job(**row)
        if job.job_id in seen:
            raise ValueError(f"job_id {job.job_id} appears twice")
        seen.add(job.job_id)
        jobs.append(job)
    return jobs
