"""Shared by tests/ and hidden/: an independent MIG table and validator, a simulation driver that
runs in the worker and records plain data, and the judge-side invariant checks on those records.

The MIG table below is transcribed by hand from `nvidia-smi mig -lgip` / `-lgipp` on an H200
(driver 580.159.04, 2026-12-02; the file clustersim/data/h200_mig_profiles.txt): the tests judge
the package's layouts with it, never with the package's own validator.
"""

from __future__ import annotations

import itertools
import traceback
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path

import pytest
from clustersim import (
    ClusterSpec,
    EasyBackfillPolicy,
    FifoPolicy,
    Job,
    NodeSpec,
    PriorityQuotaPolicy,
    pack_mig,
    simulate,
    summarize,
)
from hypothesis import HealthCheck, Phase, settings

from autograder.testing import in_worker, tolerances

PROPERTY_SETTINGS = settings(
    max_examples=25,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# name: (profile id, max instances, allowed starts, memory slices, compute slices)
H200 = {
    "1g.18gb": (19, 7, (0, 1, 2, 3, 4, 5, 6), 1, 1),
    "1g.18gb+me": (20, 1, (0, 1, 2, 3, 4, 5, 6), 1, 1),
    "1g.35gb": (15, 4, (0, 2, 4, 6), 2, 1),
    "2g.35gb": (14, 3, (0, 2, 4), 2, 2),
    "3g.71gb": (9, 2, (0, 4), 4, 3),
    "4g.71gb": (5, 1, (0,), 4, 4),
    "7g.141gb": (0, 1, (0,), 8, 7),
}


def oracle_valid(layout) -> bool:
    """The test's own rule: allowed starts, disjoint memory slices within 0..7, instance caps,
    at most 7 compute slices."""
    used, counts, compute = set(), Counter(), 0
    for name, start in layout:
        if name not in H200:
            return False
        _, cap, starts, size, g = H200[name]
        if start not in starts or start + size > 8:
            return False
        cells = set(range(start, start + size))
        if cells & used:
            return False
        used |= cells
        counts[name] += 1
        compute += g
        if counts[name] > cap:
            return False
    return compute <= 7


def all_valid_layouts() -> set[tuple]:
    """Every valid layout of one GPU, as a sorted tuple of (profile, start), by depth-first search."""
    pairs = sorted((name, s) for name, row in H200.items() for s in row[2])
    out = set()

    def grow(i, layout):
        out.add(tuple(sorted(layout)))
        for j in range(i, len(pairs)):
            if oracle_valid(layout + [pairs[j]]):
                grow(j + 1, layout + [pairs[j]])

    grow(0, [])
    return out


# ---- the packer's oracle: brute force over assignments of requests to GPUs --------------------------
@cache
def feasible(profiles: tuple[str, ...]) -> bool:
    """Can these instances (sorted profile names) share one GPU? Tries every start for each."""
    def place(i, layout):
        if i == len(profiles):
            return True
        return any(place(i + 1, layout + [(profiles[i], s)]) for s in H200[profiles[i]][2]
                   if oracle_valid(layout + [(profiles[i], s)]))
    return place(0, [])


def brute_force(requests: list[str], num_gpus: int) -> tuple[int, int]:
    """(most requests placed, fewest GPUs used for that many) over all assignments."""
    best = (0, 0)
    for assign in itertools.product(range(-1, num_gpus), repeat=len(requests)):
        groups = [tuple(sorted(r for r, g in zip(requests, assign) if g == k)) for k in range(num_gpus)]
        if all(feasible(g) for g in groups):
            placed = sum(g >= 0 for g in assign)
            used = sum(bool(g) for g in groups)
            if (placed, -used) > (best[0], -best[1]):
                best = (placed, used)
    return best


@in_worker
def packed(requests: list[str], num_gpus: int) -> list:
    r = pack_mig(requests, num_gpus)
    return [[list(p) for p in r.placements], list(r.unplaced), r.gpus_used]


def check_packing(requests: list[str], num_gpus: int) -> None:
    placements, unplaced, gpus_used = packed(requests, num_gpus)
    idx = [p[0] for p in placements]
    assert idx == sorted(set(idx)) and sorted(idx + unplaced) == list(range(len(requests)))
    layouts: dict[int, list] = {}
    for i, gpu, start in placements:
        assert 0 <= gpu < num_gpus
        layouts.setdefault(gpu, []).append((requests[i], start))
    for gpu, layout in layouts.items():
        assert oracle_valid(layout), f"GPU {gpu}: invalid layout {layout}"
    assert gpus_used == len(layouts)
    assert (len(placements), gpus_used) == brute_force(requests, num_gpus), (requests, num_gpus)


# ---- in the worker: run a simulation, record plain data --------------------------------------------
@in_worker
def run_sim(nodes: list[dict], jobs: list[dict], policy: str, quotas: dict | None = None) -> dict:
    """simulate() on plain data; returns records, segments, the summary and a snapshot of the
    cluster's allocations after every scheduling pass (or the error the package raised)."""
    out = {"snaps": [], "error": None}
    try:
        spec = ClusterSpec(tuple(NodeSpec(**n) for n in nodes))
        pol = {"fifo": FifoPolicy, "easy": EasyBackfillPolicy}.get(policy)
        pol = pol() if pol is not None else PriorityQuotaPolicy(dict(quotas or {}))

        def observe(t, cluster):
            out["snaps"].append([t, {jid: [[list(s) for s in pod] for pod in pods]
                                     for jid, pods in cluster.allocations.items()}])

        res = simulate(spec, [Job(**j) for j in jobs], pol, observe)
        s = summarize(res)
        out["records"] = {r.job_id: [r.arrival, r.start, r.end, r.wait, r.preemptions] for r in res.records}
        out["segments"] = [[g.job_id, g.start, g.end, [[list(x) for x in pod] for pod in g.pods], g.preempted]
                           for g in res.segments]
        out["summary"] = {"makespan": s.makespan, "utilisation": s.utilisation, "mean_wait": s.mean_wait,
                          "max_wait": s.max_wait, "preemptions": s.preemptions}
    except Exception as e:  # noqa: BLE001  reported by the judge
        out["error"] = describe_error(e)
    return out


def describe_error(e: Exception) -> str:
    """'<type>: <message> (<file>:<line> in <function>)' on the first line (the line a report
    shows), then the last four frames of the traceback."""
    frame = traceback.extract_tb(e.__traceback__)[-1]
    what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return f"{what} ({Path(frame.filename).name}:{frame.lineno} in {frame.name})\n{traceback.format_exc(limit=-4)}"


def raised(error: str, case: str = "") -> str:
    """The judge's failure message for an error `run_sim` recorded: complete on its first line,
    then the case (if given) and the frames."""
    first, _, frames = error.partition("\n")
    return f"the package raised {first}{case}\nits last frames:\n{frames}"


# ---- in the judge: checks on the records -------------------------------------------------------
def _node_table(nodes: list[dict]) -> dict:
    table = {}
    for n in nodes:
        islands = n.get("islands") or [list(range(n["num_gpus"]))]
        table[n["name"]] = (n["num_gpus"], {g: i for i, island in enumerate(islands) for g in island})
    return table


def check_pod(job: dict, pod: list, nodes: dict) -> None:
    """One pod's slots: the right kind and number, inside the job's TP scope."""
    jid = job["job_id"]
    if job.get("mig_profile"):
        assert len(pod) == 1, f"job {jid}: a MIG pod is one instance, got {pod}"
        _node, _gpu, profile, start = pod[0]
        assert profile == job["mig_profile"] and start in H200[profile][2], f"job {jid}: bad MIG slot {pod[0]}"
        return
    assert len(pod) == job.get("gpus_per_pod", 1), f"job {jid}: pod {pod} has the wrong number of GPUs"
    assert all(s[2] is None and s[3] is None for s in pod), f"job {jid}: whole-GPU pod holds a MIG slot"
    scope = job.get("tp_scope", "island")
    if scope in ("island", "node"):
        assert len({s[0] for s in pod}) == 1, f"job {jid}: TP group split across nodes: {pod}"
    if scope == "island":
        islands = nodes[pod[0][0]][1]
        assert len({islands[s[1]] for s in pod}) == 1, f"job {jid}: TP group split across NVLink islands: {pod}"


def check_allocations(jobs_by_id: dict, alloc: dict, nodes: dict, where: str) -> None:
    """Full gangs only, every slot on a real GPU, no GPU oversubscribed, every MIG layout valid."""
    whole, mig = {}, defaultdict(list)
    for jid, pods in alloc.items():
        job = jobs_by_id[jid]
        assert len(pods) == job.get("pods", 1), f"{where}: job {jid} holds {len(pods)} pods of {job.get('pods', 1)}: a partial gang"
        for pod in pods:
            check_pod(job, pod, nodes)
            for node, gpu, profile, start in pod:
                assert node in nodes and 0 <= gpu < nodes[node][0], f"{where}: no GPU {node}:{gpu}"
                key = (node, gpu)
                assert key not in whole, f"{where}: GPU {key} held by jobs {whole[key]} and {jid}"
                if profile is None:
                    assert key not in mig, f"{where}: GPU {key} held whole by {jid} while in MIG use"
                    whole[key] = jid
                else:
                    mig[key].append((profile, start))
    for key, layout in mig.items():
        assert oracle_valid(layout), f"{where}: GPU {key} has an invalid MIG layout {sorted(layout)}"


def check_run(nodes: list[dict], jobs: list[dict], out: dict) -> dict:
    """Every invariant of a simulation's records; returns the records (job_id -> fields)."""
    assert out["error"] is None, raised(out["error"])
    table = _node_table(nodes)
    by_id = {j["job_id"]: j for j in jobs}
    segs = out["segments"]
    assert out["snaps"], "the observer was never called"
    for t, alloc in out["snaps"]:
        check_allocations(by_id, alloc, table, f"t={t}")
        running = {g[0]: g[3] for g in segs if g[1] <= t < g[2]}
        assert set(alloc) == set(running), f"t={t}: jobs holding GPUs {sorted(alloc)} != jobs running {sorted(running)}"
        for jid, pods in running.items():
            assert alloc[jid] == pods, f"t={t}: job {jid} holds {alloc[jid]} but its segment says {pods}"
    records = out["records"]
    assert set(records) == set(by_id), "every job must complete and have a record"
    for jid, (arrival, start, end, wait, preemptions) in records.items():
        job = by_id[jid]
        assert arrival == job["arrival"] and start >= arrival, f"job {jid} starts before it arrives"
        assert abs(end - start - job["duration"]) < 1e-9, f"job {jid}: end - start != duration"
        assert abs(wait - (end - arrival - job["duration"])) < 1e-9
        mine = [g for g in segs if g[0] == jid]
        assert [g for g in mine if not g[4]] and sum(not g[4] for g in mine) == 1
        assert preemptions == sum(g[4] for g in mine)
        assert all(g[1] >= arrival for g in mine)
    return records


def sim(nodes, jobs, policy, quotas=None):
    """Run and check; returns (records, summary, segments)."""
    out = run_sim(nodes, jobs, policy, quotas)
    records = check_run(nodes, jobs, out)
    return records, out["summary"], out["segments"]


def starts_ends(records: dict) -> dict:
    return {jid: (r[1], r[2]) for jid, r in records.items()}


def job(job_id, arrival, duration, pods=1, gpus_per_pod=1, **more) -> dict:
    return dict(job_id=job_id, arrival=arrival, duration=duration, pods=pods, gpus_per_pod=gpus_per_pod, **more)


def nodes_of(*sizes, rack="rack0") -> list[dict]:
    """Nodes named a, b, c, ... with the given GPU counts, one rack."""
    return [{"name": "abcdefgh"[i], "num_gpus": n, "rack": rack} for i, n in enumerate(sizes)]


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rel": r, "abs": a} for pytest.approx: the tolerance `name` of assignment.toml's
    [tolerances] (rtol, atol)."""
    def pick(name: str) -> dict:
        t = _TOLERANCES(name)
        return {"rel": t["rtol"], "abs": t["atol"]}
    return pick
