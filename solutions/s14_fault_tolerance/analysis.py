"""The analysis (README, section "Analysis"): a 16-node job of 3000 steps replayed against a failure
trace with YOUR Supervisor deciding, checkpoints (blocking, C_SYNC seconds each) committed with YOUR
commit_checkpoint every `every` steps.

    python analysis.py          # prints every number of answers/fault_numbers.toml

The grader runs replay() from its own copy of this file with your package.
"""

from __future__ import annotations

import math
import tempfile

NODES, STEPS, T_STEP = 16, 3000, 2.0        # nodes, steps of the job, seconds a step
C_SYNC = 30.0                               # seconds a blocking checkpoint stops training
TIMEOUT, TICK = 60.0, 10.0                  # the supervisor's heartbeat timeout, its tick
FAILURES = [(1234.0, 5), (3900.0, 11), (4321.0, 2)]  # (seconds since the start, node that dies)
MTBF_NODE_H = 10.0                          # one node's mean time between failures, hours


def replay(every: int, trace: list | None = None) -> dict:
    """{"lost_steps": steps computed again after restarts, "wall_hours": until the last step,
    "restarts"}; `trace`, if given, gets (seconds, steps done, event) at every tick, event "fail"
    when a node died, "restart" after a Launch, else "". Each generation steps in lockstep from its launch; a node of FAILURES exits 137 at
    its time (if a member), the others then block; every member beats at every tick."""
    from faulttol import Beat, Launch, Stop, Supervisor, SupervisorConfig, commit_checkpoint

    with tempfile.TemporaryDirectory() as root:
        sup = Supervisor(SupervisorConfig(TIMEOUT, 1, 10), list(range(NODES)), root)
        launch, now, lost, restarts = sup.launch(0.0), 0.0, 0, 0
        t0, done, members, pending = 0.0, launch.resume_step, set(launch.ranks), list(FAILURES)
        next_end, blocked = T_STEP, False
        while True:
            now += TICK
            exits = {}
            while not blocked and next_end <= now and done < STEPS:
                if pending and pending[0][0] < next_end and pending[0][1] in members:
                    break
                done += 1
                if done % every == 0:  # a blocking checkpoint: the next step starts C_SYNC later
                    commit_checkpoint(root, done, {"state.pt": done.to_bytes(4, "little")})
                next_end += T_STEP + (C_SYNC if done % every == 0 else 0.0)
            while pending and pending[0][0] <= now:
                when, node = pending.pop(0)
                if node in members and not blocked:
                    exits, blocked, failed_at_step = {node: 137}, True, done
                    if trace is not None:
                        trace.append((when, done, "fail"))
            if done >= STEPS and not blocked:
                exits = {n: 0 for n in members}
            if trace is not None:
                trace.append((now, done, ""))
            actions = sup.tick(now, [Beat(n, launch.generation, done + 1, now) for n in members], exits)
            for action in actions:
                if isinstance(action, Launch):
                    launch, restarts = action, restarts + 1
                    lost += failed_at_step - action.resume_step
                    done, members, blocked, next_end = action.resume_step, set(action.ranks), False, now + T_STEP
                    if trace is not None:
                        trace.append((now, done, "restart"))
                elif isinstance(action, Stop):
                    return {"lost_steps": lost, "wall_hours": now / 3600, "restarts": restarts}


def young_daly_steps() -> float:
    """Young/Daly's interval sqrt(2 C M) in steps, M = the job's MTBF = one node's / NODES."""
    return math.sqrt(2 * C_SYNC * MTBF_NODE_H * 3600 / NODES) / T_STEP


if __name__ == "__main__":
    for every in (50, 200, 500):
        print(f"checkpoint every {every} steps:", replay(every))
    print("Young/Daly interval, steps:", round(young_daly_steps(), 1))
