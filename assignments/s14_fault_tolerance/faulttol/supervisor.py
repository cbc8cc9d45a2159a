"""The supervisor of an elastic job (torchrun's agent, reduced to its decisions).

The job runs on `nodes` (one training process each). The engine around the supervisor starts and
kills processes and reports what it saw; the supervisor decides. Every `tick(now, beats, exits)`
hands it the heartbeats that arrived since the last tick (each says which step a node has
entered) and the nodes whose process exited, with the exit status. It answers with actions:
Kill(nodes) (end those processes now), Launch(ranks, world, resume_step) (start a new generation:
a rendezvous of the surviving nodes), Stop(reason).

It never waits for a training process to report an error: a process stuck in a collective whose
peer hung reports nothing at all (gloo could block forever after a peer died). Its own clock
decides: a node silent for longer than the heartbeat timeout has failed, exactly like one that
exited with an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .files import latest_valid, read_checkpoint


@dataclass(frozen=True)
class Beat:
    """Node `node` entered step `step` (1-based) at time `time`, in generation `generation`."""

    node: int
    generation: int
    step: int
    time: float


@dataclass(frozen=True)
class Kill:
    nodes: tuple[int, ...]  # ascending


@dataclass(frozen=True)
class Launch:
    """A new generation: ranks[node] = its rank (0..world-1, by ascending node id); training
    restarts after step `resume_step` (the latest valid checkpoint; 0: from the start)."""

    ranks: dict[int, int]
    world: int
    resume_step: int
    generation: int


@dataclass(frozen=True)
class Stop:
    reason: str


@dataclass(frozen=True)
class SupervisorConfig:
    heartbeat_timeout_s: float  # a node silent longer than this has failed
    min_nodes: int = 1          # fewer survivors than this: stop instead of restarting
    max_restarts: int = 3       # more failures than this: stop

    def __post_init__(self) -> None:
        if self.heartbeat_timeout_s <= 0:
            raise ValueError(f"SupervisorConfig: heartbeat_timeout_s must be > 0, got {self.heartbeat_timeout_s}")
        if self.min_nodes < 1 or self.max_restarts < 0:
            raise ValueError(f"SupervisorConfig: need min_nodes >= 1 and max_restarts >= 0, "
                             f"got {self.min_nodes}, {self.max_restarts}")


@dataclass
class _Generation:
    number: int
    members: list[int]
    last_beat: dict[int, float] = field(default_factory=dict)  # node -> time of its last beat
    finished: set[int] = field(default_factory=set)            # exited with status 0


class Supervisor:
    """Call `launch(now)` once, then `tick` every fraction of the timeout until it returns Stop."""

    def __init__(self, config: SupervisorConfig, nodes: list[int], checkpoint_root: str | os.PathLike) -> None:
        if not nodes or len(set(nodes)) != len(nodes):
            raise ValueError(f"Supervisor: need distinct nodes, got {nodes}")
        self.config, self.root = config, Path(checkpoint_root)
        self.restarts = 0
        self.gen = _Generation(number=-1, members=sorted(nodes))

    def resume_step(self) -> int:
        """The step of the latest valid checkpoint under the root (0 when there is none)."""
        path = latest_valid(self.root)
        return read_checkpoint(path)[0] if path is not None else 0

    def launch(self, now: float) -> Launch:
        """Start the first generation on every node."""
        return self._rendezvous(self.gen.members, now)

    def _rendezvous(self, members: list[int], now: float) -> Launch:
        """A new generation on `members`: ranks by ascending node id, every clock restarted now."""
        raise NotImplementedError("s14.17: Supervisor._rendezvous")

    def failed_nodes(self, now: float, beats: list[Beat], exits: dict[int, int]) -> list[int]:
        """Record this tick's beats and exits (only those of the current generation's members);
        return the members that failed: exited with a non-zero status, or silent (no beat) for
        longer than the timeout without having exited 0. Ascending."""
        raise NotImplementedError("s14.18: Supervisor.failed_nodes")

    def tick(self, now: float, beats: list[Beat], exits: dict[int, int]) -> list[Kill | Launch | Stop]:
        """One look at the job. Nothing failed: [] (or [Stop("finished")] once every member exited
        0). Some failed: kill every member still running (the healthy ones are stuck in collectives
        with the failed ones), then either Launch a new generation on the others or, with fewer
        than min_nodes of them or after max_restarts restarts, Stop."""
        failed = self.failed_nodes(now, beats, exits)
        gen = self.gen
        if not failed:
            return [Stop("finished")] if gen.finished == set(gen.members) else []
        raise NotImplementedError("s14.19: Supervisor.tick")
