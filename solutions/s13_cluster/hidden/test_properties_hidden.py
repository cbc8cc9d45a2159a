"""Random traces through every policy: no partial gang, no GPU oversubscribed, no invalid MIG
layout after any pass, every job completes once, FIFO starts in order, only lower-priority or
borrowed jobs are preempted."""

from __future__ import annotations

import random

import pytest
from conftest import PROPERTY_SETTINGS, check_run, run_sim
from hypothesis import given
from hypothesis import strategies as st

PROFILES = ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]


def random_trace(rng: random.Random):
    """Nodes of 4 or 8 GPUs (an 8 may be two islands of 4) and jobs that all fit the empty cluster."""
    nodes = []
    for i in range(rng.randint(1, 3)):
        n = {"name": f"n{i}", "num_gpus": rng.choice([4, 8]), "rack": f"r{rng.randint(0, 1)}"}
        if n["num_gpus"] == 8 and rng.random() < 0.5:
            n["islands"] = [[0, 1, 2, 3], [4, 5, 6, 7]]
        nodes.append(n)
    jobs = []
    for jid in range(rng.randint(3, 12)):
        common = {"job_id": jid, "arrival": float(rng.randint(0, 20)), "duration": float(rng.randint(1, 15)),
                      "priority": rng.randint(0, 2), "queue": rng.choice(["A", "B"])}
        if rng.random() < 0.25:
            jobs.append(common | {"pods": rng.randint(1, 2), "mig_profile": rng.choice(PROFILES)})
            continue
        scope, g = rng.choice(["island", "node", "any"]), rng.choice([1, 2, 4])
        if scope == "island":
            room = sum(len(isl) // g for n in nodes for isl in n.get("islands", [range(n["num_gpus"])]))
        elif scope == "node":
            room = sum(n["num_gpus"] // g for n in nodes)
        else:
            room = sum(n["num_gpus"] for n in nodes) // g
        jobs.append(common | {"pods": rng.randint(1, min(3, room)), "gpus_per_pod": g, "tp_scope": scope})
    return nodes, jobs


@pytest.mark.points(4)
@pytest.mark.parametrize("policy", ["fifo", "easy", "priority"])
@PROPERTY_SETTINGS
@given(seed=st.integers(0, 1_000_000))
def test_random_traces_keep_every_invariant(policy, seed):
    rng = random.Random(seed)
    nodes, jobs = random_trace(rng)
    quotas = {"A": rng.randint(0, 8), "B": rng.randint(0, 8)}
    out = run_sim(nodes, jobs, policy, quotas)
    records = check_run(nodes, jobs, out)
    by_id = {j["job_id"]: j for j in jobs}
    keys = [(s[1], s[0]) for s in out["segments"]]
    assert keys == sorted(keys), f"segments must come by (start, job_id); got (start, job_id) {keys}"
    if policy == "fifo":
        order = sorted(by_id, key=lambda j: (by_id[j]["arrival"], j))
        starts = [records[j][1] for j in order]
        assert starts == sorted(starts), "strict FIFO starts jobs in arrival order"
    if policy != "priority":
        assert all(r[4] == 0 for r in records.values()), "FIFO and backfill never preempt"
    else:
        segs = out["segments"]
        for victim in (s for s in segs if s[4]):
            # someone started at the preemption time: of the victim's queue with a higher priority,
            # or of another queue (reclaiming borrowed GPUs)
            t = victim[2]
            starters = [by_id[s[0]] for s in segs if s[1] == t and s[0] != victim[0]]
            v = by_id[victim[0]]
            assert any(j["queue"] != v["queue"] or j["priority"] > v["priority"] for j in starters), \
                f"job {victim[0]} preempted at {t} by no eligible job"
