"""Judge-side checks shared by tests/ and hidden/: the checkpoint format read and written with the
judge's own code (manifest, sizes, sha256 recomputed here), the corruptions a crash or a bad disk
leaves, and the judge's side of the simulated cluster the supervisor tests drive."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import torch


def judge_valid(folder: Path) -> bool:
    """The judge's own reading of the format: manifest, its step, each file's size and sha256."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        if folder.name != f"step_{manifest['step']:08d}" or not manifest["files"]:
            return False
        for name, meta in manifest["files"].items():
            data = (folder / name).read_bytes()
            if len(data) != meta["bytes"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
                return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def judge_steps(root: Path) -> dict[int, bool]:
    """step -> valid (by the judge) of every step_* folder under root."""
    out = {}
    for p in Path(root).glob("step_*"):
        if p.name[5:].isdigit():
            out[int(p.name[5:])] = judge_valid(p)
    return out


def judge_commit(root: Path, step: int, files: dict[str, bytes]) -> Path:
    """A valid checkpoint written by the judge's code (the handout's format), not the package's."""
    folder = Path(root) / f"step_{step:08d}"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    digests = {n: {"bytes": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in files.items()}
    (folder / "manifest.json").write_text(json.dumps({"step": step, "files": digests}))
    return folder


def judge_load(folder: Path, name: str = "state.pt") -> dict:
    """A data file of a checkpoint, decoded here (weights_only: no code runs)."""
    return torch.load(io.BytesIO((Path(folder) / name).read_bytes()), weights_only=True)


def flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at % len(data)] ^= 0x55
    path.write_bytes(bytes(data))


def _manifest_of(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


# name -> how it damages a committed checkpoint folder (what a crash, a full disk or a bad sector leaves)
CORRUPTIONS = {
    "data_file_truncated": lambda f: (f / "state.pt").write_bytes((f / "state.pt").read_bytes()[:-100]),
    "one_byte_flipped": lambda f: flip_byte(f / "state.pt", 777),
    "manifest_missing": lambda f: (f / "manifest.json").unlink(),
    "manifest_truncated": lambda f: (f / "manifest.json").write_text((f / "manifest.json").read_text()[:20]),
    "data_file_missing": lambda f: (f / "state.pt").unlink(),
    "manifest_names_another_step": lambda f: (f / "manifest.json").write_text(
        json.dumps(_manifest_of(f) | {"step": _manifest_of(f)["step"] - 1})),
}


def assert_params_equal(got: list, want: list, what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} parameters, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), (f"{what}: parameter {i} is not bit-identical to the uninterrupted run "
                                   f"(max diff {(g - w).abs().max():.3g})")


# ---------------------------------------------------------------- the simulated cluster (judge's clock)

TICK, BEAT, STEP_S, LAST_STEP, START_S = 0.5, 0.5, 1.0, 16, 2.0


class Cluster:
    """Nodes whose processes start START_S after a launch (no beat before), then train in lockstep
    (step s of a generation starts STEP_S after step s-1) and beat every BEAT seconds with the step
    they are in, also while blocked in a collective. The judge's clock drives the supervisor (a tick every TICK s) and executes what it
    answers. Generation 0 leaves checkpoints of steps 4 and 8 and a torn one of step 12 (a crash while it
    was written)."""

    def __init__(self, root: Path, nodes: list[int], timeout: float, min_nodes: int = 1, max_restarts: int = 3) -> None:
        from conftest import new_supervisor

        self.root, self.nodes, self.timeout = root, nodes, timeout
        self.sup = new_supervisor(timeout, min_nodes, max_restarts, nodes, str(root))
        self.actions: list[tuple] = []
        self.launches: list[tuple] = []
        self.killed: list[tuple] = []
        self.kill_times: list[float] = []
        self.lineage: list[int] = []   # the steps the final state holds, in order
        self.last_beat: dict[int, float] = {}

    def run_until(self, fault: tuple[str, int, int], horizon: float = 80.0) -> None:
        """Run generation 0 with `fault` = (die | hang, node, step): the node fails in the middle
        of that step, and every other node blocks in that step's collective."""
        from conftest import supervisor_launch, supervisor_tick

        kind, victim, bad_step = fault
        launch = supervisor_launch(self.sup, 0.0)
        self._launched(launch, 0.0)
        gen, t0, resume, members = launch[4], 0.0, launch[3], sorted(launch[1])
        stopped: set[int] = set()  # killed, exited or hung nodes of this generation
        fail_at = t0 + START_S + (bad_step - resume - 1) * STEP_S + STEP_S / 2
        now, faulty = 0.0, True
        while now < horizon:
            prev, now = now, now + TICK
            beats, exits = [], {}
            for s in (4, 8, 12):  # generation 0 checkpoints as its steps complete; step 12's is torn
                if faulty and prev < START_S + s * STEP_S <= now < fail_at:
                    judge_commit(self.root, s, {"state.pt": bytes([s]) * 4096})
                    if s == 12:
                        flip_byte(Path(self.root) / "step_00000012" / "state.pt", 100)
            for node in members:
                if node in stopped:
                    continue
                for k in range(int(prev / BEAT) + 1, int(now / BEAT) + 1):
                    t = k * BEAT
                    if t < t0 + START_S:  # the process is still starting
                        continue
                    if faulty and node == victim and t >= fail_at:
                        break
                    step = min(LAST_STEP, resume + 1 + int((t - t0 - START_S) / STEP_S))
                    if faulty and t >= fail_at:
                        step = min(step, bad_step)  # blocked in the collective of the failed step
                    beats.append((node, gen, step, t))
                    self.last_beat[node] = t
            if faulty and prev < fail_at <= now and kind == "die":
                exits[victim] = 137
                stopped.add(victim)
            if faulty and kind == "hang" and now >= fail_at:
                stopped.add(victim)
            done_at = t0 + START_S + (LAST_STEP - resume) * STEP_S
            if not faulty and prev < done_at <= now:
                exits = {n: 0 for n in members if n not in stopped}
                stopped |= set(exits)
            actions = supervisor_tick(self.sup, now, beats, exits)
            self.actions += actions
            for action in actions:
                if action[0] == "kill":
                    self.killed.append(action[1])
                    self.kill_times.append(now)
                    stopped |= set(action[1])
                    if faulty:  # what generation 0 had applied, as far as the last valid checkpoint holds
                        self.lineage = []
                elif action[0] == "launch":
                    self._launched(action, now)
                    gen, t0, resume, members, stopped, faulty = action[4], now, action[3], sorted(action[1]), set(), False
                elif action[0] == "stop":
                    if not faulty and action[1] == "finished":
                        self.lineage += list(range(resume + 1, LAST_STEP + 1))
                    return

    def _launched(self, launch: tuple, now: float) -> None:
        self.launches.append(launch)
        self.lineage = list(range(1, launch[3] + 1))  # what the checkpoint it resumes from holds

    def check_restart(self, failed: int, detected_by: float | None) -> None:
        first = self.launches[0]
        assert first[1] == {n: r for r, n in enumerate(sorted(self.nodes))} and first[3] == 0, (
            f"first launch: expected ranks by node id {sorted(self.nodes)} and resume step 0 (no checkpoint yet); got {first}")
        assert len(self.launches) == 2, f"expected one restart after node {failed} failed; actions: {self.actions}"
        survivors = [n for n in sorted(self.nodes) if n != failed]
        assert set(self.killed[0]) >= set(survivors), (
            f"node {failed} failed: every member still running must be killed (they are blocked in its collective); "
            f"killed {self.killed[0]}")
        if detected_by is not None:
            assert failed in self.killed[0], f"the hung node {failed} was not killed: killed {self.killed[0]}"
            late = self.kill_times[0] - self.last_beat[failed]
            assert detected_by < late <= detected_by + 2 * TICK, (
                f"the hung node's last beat was at t={self.last_beat[failed]}, the kill came at t={self.kill_times[0]}: "
                f"expected within ({detected_by}, {detected_by + 2 * TICK}] s after it (the heartbeat timeout)")
        _, ranks, world, resume, gen = self.launches[1]
        want = {n: r for r, n in enumerate(survivors)}
        assert (ranks, world) == (want, len(survivors)), f"restart: expected ranks {want}, world {len(survivors)}; got {ranks}, {world}"
        assert gen == first[4] + 1, f"restart: generation {gen}, expected {first[4] + 1}"
        assert resume == 8, (f"restart: resumed after step {resume}; the latest valid checkpoint is step 8 "
                             f"(step 12's is torn)")
        assert self.actions[-1] == ("stop", "finished"), f"the restarted job must finish: last action {self.actions[-1]}"
        assert self.lineage == list(range(1, LAST_STEP + 1)), f"steps the final state holds: {self.lineage}"
