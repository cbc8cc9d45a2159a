"""The cluster: nodes of GPUs grouped in NVLink islands and racks, and which job holds which GPU.

A job holds *slots*: a whole GPU (`Slot(node, gpu)`) or one MIG instance on a GPU
(`Slot(node, gpu, profile, start)`). A GPU is either whole-free, held whole by one job, or in MIG
use (one or more instances, possibly of different jobs); never both whole and MIG.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .mig import MigGpu, MigProfile, h200_profiles


@dataclass(frozen=True)
class NodeSpec:
    """A node: `num_gpus` GPUs numbered 0..num_gpus-1, in `rack`. `islands` partitions the GPU
    numbers into NVLink islands (GPUs of one island talk over NVLink); None means one island of
    all the node's GPUs (an HGX board), and is stored as that single island."""

    name: str
    num_gpus: int
    rack: str = "rack0"
    islands: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a node needs a name")
        if not isinstance(self.num_gpus, int) or self.num_gpus < 1:
            raise ValueError(f"node {self.name}: num_gpus must be an int >= 1, got {self.num_gpus!r}")
        islands = self.islands if self.islands is not None else (tuple(range(self.num_gpus)),)
        islands = tuple(tuple(island) for island in islands)
        flat = sorted(g for island in islands for g in island)
        if flat != list(range(self.num_gpus)) or any(not island for island in islands):
            raise ValueError(f"node {self.name}: islands {islands} must partition GPUs 0..{self.num_gpus - 1}")
        object.__setattr__(self, "islands", islands)


@dataclass(frozen=True)
class ClusterSpec:
    """The nodes, in order (the order breaks every placement tie)."""

    nodes: tuple[NodeSpec, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        if not self.nodes:
            raise ValueError("a cluster needs at least one node")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"node names must be unique: {names}")

    @property
    def total_gpus(self) -> int:
        return sum(n.num_gpus for n in self.nodes)

    def racks(self) -> list[str]:
        """Rack names in order of first appearance among the nodes."""
        return list(dict.fromkeys(n.rack for n in self.nodes))


class Slot(NamedTuple):
    """What one pod holds on one GPU: the whole GPU (profile and start None) or a MIG instance."""

    node: str
    gpu: int
    profile: str | None = None
    start: int | None = None


Pods = tuple[tuple[Slot, ...], ...]  # a gang's placement: per pod, its slots


class Cluster:
    """Mutable state: which slots each job holds. `allocations` maps job id -> its pods' slots."""

    def __init__(self, spec: ClusterSpec, profiles: dict[str, MigProfile] | None = None) -> None:
        self.spec = spec
        self.profiles = h200_profiles() if profiles is None else profiles
        self.nodes = {n.name: n for n in spec.nodes}
        self.allocations: dict[object, Pods] = {}
        self.whole: dict[tuple[str, int], object] = {}  # (node, gpu) -> job holding it whole
        self.mig: dict[tuple[str, int], MigGpu] = {}  # (node, gpu) -> its instances (GPUs in MIG use only)

    def copy(self) -> Cluster:
        other = Cluster(self.spec, self.profiles)
        other.allocations = dict(self.allocations)
        other.whole = dict(self.whole)
        other.mig = {key: gpu.copy() for key, gpu in self.mig.items()}
        return other

    def free_gpus(self, node: str) -> list[int]:
        """The node's whole-free GPUs (neither held whole nor in MIG use), ascending."""
        return [g for g in range(self.nodes[node].num_gpus) if (node, g) not in self.whole and (node, g) not in self.mig]

    def num_free(self, nodes: list[str] | None = None) -> int:
        """Whole-free GPUs on `nodes` (default: all)."""
        return sum(len(self.free_gpus(n)) for n in (nodes if nodes is not None else self.nodes))

    def bind(self, job_id: object, pods: Pods) -> None:
        """Give `job_id` all of `pods`' slots, or nothing: if any slot is unknown, taken, repeated,
        or would make a MIG layout invalid, raise ValueError and leave the cluster unchanged.
        A job already holding slots cannot be bound again (ValueError)."""
        raise NotImplementedError("s13.1: Cluster.bind")

    def release(self, job_id: object) -> Pods:
        """Free every slot `job_id` holds and return its pods (KeyError if it holds none). A GPU
        whose last MIG instance goes becomes whole-free again."""
        raise NotImplementedError("s13.2: Cluster.release")
