"""Topology-aware gang placement: where a job's pods go, all of them or none.

The rules (the handout states them; the tests hold you to them exactly):
- Whole-GPU pod of k GPUs, scope "island": among the NVLink islands with >= k whole-free GPUs,
  take the one minimising (whole-free GPUs of its node, whole-free GPUs of the island, node
  order, island order) -- best fit, so that emptier nodes stay whole -- and its k lowest free GPUs.
  Scope "node": the node minimising (whole-free GPUs, node order) among those with >= k; its k
  lowest free GPUs. Scope "any": nodes with a free GPU in order of (whole-free GPUs, node order),
  taking each one's free GPUs in ascending order until k are taken.
- MIG pod: the first GPU in MIG use (node order, then GPU number) with a valid start for the
  profile, at its lowest valid start; if none, a whole-free GPU chosen as for a 1-GPU pod of scope
  "node", at the profile's lowest allowed start.
- Gang: pods are placed one after another, each on the state the earlier ones left. Racks are
  tried first, in order of (whole-free GPUs in the rack, rack order): the first rack that holds
  the whole gang is used. Otherwise (or with a single rack) the whole cluster. None if that fails.
"""

from __future__ import annotations

from .cluster import Cluster, Pods, Slot
from .jobs import Job


def place_pod(cluster: Cluster, need: int, scope: str, nodes: list[str]) -> tuple[Slot, ...] | None:
    """Slots for one whole-GPU pod of `need` GPUs within `scope`, on `nodes` only (the module's
    rule), or None when no place fits. Does not change the cluster."""
    raise NotImplementedError("s13.8: place_pod")


def place_mig_pod(cluster: Cluster, profile: str, nodes: list[str]) -> Slot | None:
    """The slot for one MIG instance of `profile` on `nodes` only (the module's rule), or None.
    Does not change the cluster."""
    raise NotImplementedError("s13.9: place_mig_pod")


def place_gang(cluster: Cluster, job: Job) -> Pods | None:
    """Every pod of `job` placed (the module's rule), or None if the gang does not fit. Never
    changes the cluster: the caller binds the result."""
    raise NotImplementedError("s13.10: place_gang")
