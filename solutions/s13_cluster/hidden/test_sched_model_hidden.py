"""Model-based tests: random traces through FIFO and EASY backfill, compared pass by pass with a
small executable model of the handout's rules written here (placement, reservation, both policies,
the event loop). Every observable is compared: which job holds which slots after every scheduling
pass, each job's start and end, and `reservation_time` on random cluster states. Hypothesis shrinks
a failure to a short trace, printed as a reproducer.

Budget: a fixed seed and a small example count in CI; AUTOGRADER_HYPOTHESIS_PROFILE=thorough runs
ten times as many examples.
"""

from __future__ import annotations

import math
import os

import pytest
from clustersim import Cluster, ClusterSpec, Job, NodeSpec, reservation_time
from conftest import H200, oracle_valid, raised, run_sim
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from autograder.testing import in_worker

SCALE = 10 if os.environ.get("AUTOGRADER_HYPOTHESIS_PROFILE") == "thorough" else 1
MODEL_SETTINGS = settings(max_examples=40 * SCALE, derandomize=True, database=None, deadline=None,
                          phases=[Phase.explicit, Phase.generate, Phase.shrink],
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILES = sorted(H200)


# ---- the model: a cluster of plain dicts and the handout's rules -----------------------------------
class Model:
    """whole: (node, gpu) -> owner; mig: (node, gpu) -> [(profile, start, owner)]; held: owner -> pods."""

    def __init__(self, nodes: list[dict]) -> None:
        self.nodes = nodes
        self.whole: dict = {}
        self.mig: dict = {}
        self.held: dict = {}

    def copy(self) -> Model:
        m = Model(self.nodes)
        m.whole, m.held = dict(self.whole), dict(self.held)
        m.mig = {k: list(v) for k, v in self.mig.items()}
        return m

    def free(self, node: dict) -> list[int]:
        return [g for g in range(node["num_gpus"]) if (node["name"], g) not in self.whole
                and not self.mig.get((node["name"], g))]

    def bind(self, owner, pods) -> None:
        for pod in pods:
            for n, g, p, s in pod:
                if p is None:
                    self.whole[(n, g)] = owner
                else:
                    self.mig.setdefault((n, g), []).append((p, s, owner))
        self.held[owner] = pods

    def release(self, owner) -> None:
        for pod in self.held.pop(owner):
            for n, g, p, s in pod:
                if p is None:
                    del self.whole[(n, g)]
                else:
                    self.mig[(n, g)].remove((p, s, owner))


def islands_of(node: dict) -> list[list[int]]:
    return node.get("islands") or [list(range(node["num_gpus"]))]


def model_pod(m: Model, k: int, scope: str, nodes: list[dict]):
    """A whole-GPU pod of k GPUs (best fit by the node's free GPUs first), or None."""
    rank = {n["name"]: i for i, n in enumerate(m.nodes)}
    if scope == "island":
        options = [((len(m.free(n)), len(avail), rank[n["name"]], i), n["name"], avail)
                   for n in nodes for i, isl in enumerate(islands_of(n))
                   for avail in [[g for g in m.free(n) if g in isl]] if len(avail) >= k]
        if not options:
            return None
        _, name, avail = min(options)
        return [[name, g, None, None] for g in avail[:k]]
    if scope == "node":
        fits = [n for n in nodes if len(m.free(n)) >= k]
        if not fits:
            return None
        best = min(fits, key=lambda n: (len(m.free(n)), rank[n["name"]]))
        return [[best["name"], g, None, None] for g in m.free(best)[:k]]
    slots = [[n["name"], g, None, None] for n in sorted(nodes, key=lambda n: (len(m.free(n)), rank[n["name"]]))
             for g in m.free(n)]
    return slots[:k] if len(slots) >= k else None


def model_mig_pod(m: Model, profile: str, nodes: list[dict]):
    """First GPU in MIG use with room (lowest start), else a fresh GPU as a 1-GPU node-scope pod."""
    for n in nodes:
        for g in range(n["num_gpus"]):
            layout = [(p, s) for p, s, _ in m.mig.get((n["name"], g), [])]
            if layout:
                ok = [s for s in H200[profile][2] if oracle_valid([*layout, (profile, s)])]
                if ok:
                    return [[n["name"], g, profile, min(ok)]]
    pod = model_pod(m, 1, "node", nodes)
    return None if pod is None else [[pod[0][0], pod[0][1], profile, H200[profile][2][0]]]


def model_gang(m: Model, job: dict):
    """The gang's pods (racks by free GPUs first, then the whole cluster), or None."""
    racks = list(dict.fromkeys(n.get("rack", "rack0") for n in m.nodes))
    members = {r: [n for n in m.nodes if n.get("rack", "rack0") == r] for r in racks}
    tries = sorted(racks, key=lambda r: (sum(len(m.free(n)) for n in members[r]), racks.index(r)))
    groups = [members[r] for r in tries] + ([m.nodes] if len(racks) > 1 else [])
    for nodes in groups:
        work, pods = m.copy(), []
        for i in range(job.get("pods", 1)):
            if job.get("mig_profile"):
                pod = model_mig_pod(work, job["mig_profile"], nodes)
            else:
                pod = model_pod(work, job.get("gpus_per_pod", 1), job.get("tp_scope", "island"), nodes)
            if pod is None:
                break
            work.bind(("pod", i), [pod])
            pods.append(pod)
        else:
            return pods
    return None


def model_reservation(m: Model, ends: dict, job: dict, now: float) -> float:
    if model_gang(m, job) is not None:
        return now
    work = m.copy()
    for t in sorted(set(ends.values())):
        for owner in [o for o, e in ends.items() if e == t]:
            work.release(owner)
        if model_gang(work, job) is not None:
            return t
    return math.inf


def model_pass(m: Model, pending: list[dict], running: dict, now: float, policy: str) -> list[dict]:
    """One scheduling pass; starts jobs in m and running (job_id -> end); returns those started."""
    started = []
    queue = list(pending)
    while queue and (pods := model_gang(m, queue[0])) is not None:
        job = queue.pop(0)
        m.bind(job["job_id"], pods)
        running[job["job_id"]] = now + job["duration"]
        started.append(job)
    if policy == "fifo" or not queue:
        return started
    head, shadow = queue[0], model_reservation(m, running, queue[0], now)
    for job in queue[1:]:  # every later job is tried, not only those before the first misfit
        pods = model_gang(m, job)
        if pods is None:
            continue
        trial = m.copy()
        trial.bind(job["job_id"], pods)
        if model_reservation(trial, running | {job["job_id"]: now + job["duration"]}, head, now) <= shadow:
            m.bind(job["job_id"], pods)
            running[job["job_id"]] = now + job["duration"]
            started.append(job)
    return started


def model_simulate(nodes: list[dict], jobs: list[dict], policy: str) -> tuple[list, dict]:
    """(snapshots [t, {job_id: pods}] after every pass, {job_id: (start, end)})."""
    m, todo = Model(nodes), sorted(jobs, key=lambda j: (j["arrival"], j["job_id"]))
    pending, running, snaps, times = [], {}, [], {}
    now = todo[0]["arrival"]
    while True:
        for jid in sorted(j for j, e in running.items() if e == now):
            del running[jid]
            m.release(jid)
        while todo and todo[0]["arrival"] == now:
            pending.append(todo.pop(0))
        for job in model_pass(m, pending, running, now, policy):
            pending.remove(job)
            times[job["job_id"]] = (now, now + job["duration"])
        snaps.append([now, {jid: pods for jid, pods in m.held.items()}])
        upcoming = list(running.values()) + ([todo[0]["arrival"]] if todo else [])
        if not upcoming:
            return snaps, times
        now = min(upcoming)


# ---- random traces ---------------------------------------------------------------------------------
@st.composite
def clusters(draw) -> list[dict]:
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        size = draw(st.sampled_from([4, 8, 2]))
        node = {"name": f"n{i}", "num_gpus": size, "rack": draw(st.sampled_from(["r0", "r1"]))}
        if size >= 4 and draw(st.booleans()):
            node["islands"] = [list(range(size // 2)), list(range(size // 2, size))]
        nodes.append(node)
    return nodes


def draw_job(draw, job_id: int, arrival: float) -> dict:
    job = {"job_id": job_id, "arrival": arrival, "duration": float(draw(st.integers(1, 9)))}
    if draw(st.integers(0, 4)) == 0:
        return job | {"pods": draw(st.integers(1, 2)), "mig_profile": draw(st.sampled_from(PROFILES))}
    return job | {"pods": draw(st.integers(1, 3)), "gpus_per_pod": draw(st.sampled_from([1, 2, 4])),
                  "tp_scope": draw(st.sampled_from(["island", "node", "any"]))}


def fitting(nodes: list[dict], jobs: list[dict]) -> list[dict]:
    """The jobs that fit the empty cluster (simulate refuses the others); one 1-GPU job if none."""
    jobs = [j for j in jobs if model_gang(Model(nodes), j) is not None]
    return jobs or [{"job_id": 0, "arrival": 0.0, "duration": 1.0}]


@st.composite
def traces(draw) -> tuple[list[dict], list[dict]]:
    """A cluster and 1..9 jobs that each fit the empty cluster (whole-GPU gangs and MIG gangs)."""
    nodes = draw(clusters())
    jobs = [draw_job(draw, jid, float(draw(st.integers(0, 8)))) for jid in range(draw(st.integers(1, 9)))]
    return nodes, fitting(nodes, jobs)


@st.composite
def backfill_traces(draw) -> tuple[list[dict], list[dict]]:
    """Traces aimed at the backfill scan: at t=0 one or two blockers of 1-GPU pods and a head
    needing more GPUs than they leave; at t=1 up to 7 jobs competing to be backfilled."""
    nodes = draw(clusters())
    total = sum(n["num_gpus"] for n in nodes)
    jobs, held = [], 0
    for jid in range(draw(st.integers(1, 2))):
        pods = draw(st.integers(1, max(1, total - held - 1)))
        jobs.append({"job_id": jid, "arrival": 0.0, "duration": float(draw(st.integers(2, 9))), "pods": pods,
                     "gpus_per_pod": 1, "tp_scope": "any"})
        held += pods
    head = len(jobs)
    jobs.append({"job_id": head, "arrival": 0.0, "duration": float(draw(st.integers(1, 9))),
                 "pods": draw(st.integers(min(total, total - held + 1), total)), "gpus_per_pod": 1, "tp_scope": "any"})
    jobs += [draw_job(draw, jid, 1.0) for jid in range(head + 1, head + 1 + draw(st.integers(1, 7)))]
    return nodes, fitting(nodes, jobs)


def reproducer(nodes: list[dict], jobs: list[dict], policy: str) -> str:
    return f"\n  nodes = {nodes}\n  jobs = {jobs}\n  policy = {policy!r}"


def compare_runs(nodes: list[dict], jobs: list[dict], policy: str) -> None:
    out = run_sim(nodes, jobs, policy)
    case = reproducer(nodes, jobs, policy)
    assert out["error"] is None, raised(out["error"], f"\ncase:{case}")
    snaps, times = model_simulate(nodes, jobs, policy)
    got = [[t, {int(j): pods for j, pods in alloc.items()}] for t, alloc in out["snaps"]]
    for (t, want), (t2, have) in zip(snaps, got):
        assert t == t2, f"pass times differ: expected a pass at t={t}, got t={t2}; case:{case}"
        missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
        assert want == have, (f"after the pass at t={t}: expected jobs {sorted(want)} holding GPUs, got {sorted(have)} "
                              f"(missing {missing}, unexpected {extra}); expected slots {want}, got {have}; case:{case}")
    assert len(snaps) == len(got), f"expected {len(snaps)} scheduling passes, got {len(got)}; case:{case}"
    have = {int(j): (r[1], r[2]) for j, r in out["records"].items()}
    assert have == times, f"job (start, end) expected {times}, got {have}; case:{case}"


# a head blocked on a full node, then a 2-GPU job that does not fit now, then a 1-GPU job that fits
# and ends before the reservation: it must be backfilled even though the job before it was skipped
SKIPPED_MISFIT = ([{"name": "n0", "num_gpus": 4, "rack": "r0"}],
                  [{"job_id": 0, "arrival": 0.0, "duration": 10.0, "pods": 1, "gpus_per_pod": 3},
                   {"job_id": 1, "arrival": 1.0, "duration": 1.0, "pods": 1, "gpus_per_pod": 4},
                   {"job_id": 2, "arrival": 1.0, "duration": 1.0, "pods": 1, "gpus_per_pod": 2},
                   {"job_id": 3, "arrival": 1.0, "duration": 1.0, "pods": 1, "gpus_per_pod": 1}])
# a 1-GPU job that fits now but would delay the head, then one that ends in time: the scan goes on
SKIPPED_LATE = ([{"name": "n0", "num_gpus": 4, "rack": "r0"}],
                [{"job_id": 0, "arrival": 0.0, "duration": 5.0, "pods": 1, "gpus_per_pod": 3},
                 {"job_id": 1, "arrival": 1.0, "duration": 1.0, "pods": 1, "gpus_per_pod": 4},
                 {"job_id": 2, "arrival": 1.0, "duration": 9.0, "pods": 1, "gpus_per_pod": 1},
                 {"job_id": 3, "arrival": 1.0, "duration": 2.0, "pods": 1, "gpus_per_pod": 1}])


@pytest.mark.points(4)
@pytest.mark.parametrize("policy", ["fifo", "easy"])
@MODEL_SETTINGS
@given(case=traces())
@example(case=SKIPPED_MISFIT)
@example(case=SKIPPED_LATE)
def test_policies_match_the_model_after_every_pass(policy, case):
    nodes, jobs = case
    compare_runs(nodes, jobs, policy)


@pytest.mark.points(3)
@MODEL_SETTINGS
@given(case=backfill_traces())
def test_backfill_scan_matches_the_model(case):
    nodes, jobs = case
    compare_runs(nodes, jobs, "easy")


# ---- reservation_time on random states -------------------------------------------------------------
@in_worker
def student_reservation(nodes: list[dict], held: list, head: dict, now: float) -> float:
    cluster = Cluster(ClusterSpec(tuple(NodeSpec(**n) for n in nodes)))
    for jid, pods, _end in held:
        cluster.bind(jid, tuple(tuple(tuple(s) for s in pod) for pod in pods))
    return reservation_time(cluster, {jid: end for jid, _pods, end in held}, Job(**head), now)


@st.composite
def busy_states(draw):
    """A cluster with running jobs bound where the model places them, their end times, and a head."""
    nodes, jobs = draw(traces())
    m, held = Model(nodes), []
    for job in jobs[:-1]:
        pods = model_gang(m, job)
        if pods is not None:
            m.bind(job["job_id"], pods)
            held.append([job["job_id"], pods, float(draw(st.integers(1, 6)))])
    return nodes, held, jobs[-1] | {"job_id": 99}


@pytest.mark.points(2)
@MODEL_SETTINGS
@given(state=busy_states())
def test_reservation_time_matches_the_model(state):
    nodes, held, head = state
    m = Model(nodes)
    for jid, pods, _ in held:
        m.bind(jid, pods)
    want = model_reservation(m, {jid: end for jid, _, end in held}, head, 0.0)
    got = student_reservation(nodes, held, head, 0.0)
    assert got == want, (f"reservation_time = {got}, expected {want} for head {head} with running jobs "
                         f"[job_id, pods, end] = {held} on nodes {nodes}")
