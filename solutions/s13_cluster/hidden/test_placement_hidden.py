"""Placement edge cases: rack preference, MIG pods, release, and a property over random gangs."""

from __future__ import annotations

import random

import pytest
from clustersim import Cluster, ClusterSpec, Job, NodeSpec, place_gang
from conftest import PROPERTY_SETTINGS, _node_table, check_allocations, oracle_valid
from hypothesis import given
from hypothesis import strategies as st

from autograder.testing import in_worker

FOUR_NODES_TWO_RACKS = [{"name": "n0", "num_gpus": 4, "rack": "r0"}, {"name": "n1", "num_gpus": 4, "rack": "r0"},
                        {"name": "n2", "num_gpus": 4, "rack": "r1"}, {"name": "n3", "num_gpus": 4, "rack": "r1"}]


@in_worker
def place_sequence(nodes: list[dict], held: dict, jobs: list[dict]) -> list:
    """Place and bind each job in turn (None when it does not fit); the pods as lists."""
    cluster = Cluster(ClusterSpec(tuple(NodeSpec(**n) for n in nodes)))
    for jid, pods in held.items():
        cluster.bind(jid, tuple(tuple(tuple(s) for s in pod) for pod in pods))
    out = []
    for j in jobs:
        pods = place_gang(cluster, Job(**j))
        if pods is not None:
            cluster.bind(j["job_id"], pods)
        out.append(None if pods is None else [[list(s) for s in pod] for pod in pods])
    return out


@in_worker
def random_bind_release(nodes: list[dict], jobs: list[dict], seed: int) -> list:
    """Place, bind and randomly release jobs; after each step the allocations as plain lists."""
    rng = random.Random(seed)
    cluster = Cluster(ClusterSpec(tuple(NodeSpec(**n) for n in nodes)))
    snaps = []
    for j in jobs:
        pods = place_gang(cluster, Job(**j))
        if pods is not None:
            cluster.bind(j["job_id"], pods)
        if cluster.allocations and rng.random() < 0.3:
            cluster.release(rng.choice(sorted(cluster.allocations)))
        snaps.append([None if pods is None else j["job_id"],
                      {jid: [[list(s) for s in pod] for pod in p] for jid, p in cluster.allocations.items()},
                      sorted([list(k), v] for k, v in cluster.whole.items()),
                      {f"{k[0]}:{k[1]}": g.layout() for k, g in cluster.mig.items()}])
    return snaps


def W(node, gpu):
    return [node, gpu, None, None]


@pytest.mark.points(2)
def test_gang_prefers_one_rack():
    held = {1: [[["n0", 0], ["n0", 1]]]}  # rack r0 has 6 free, r1 has 8
    # 2 x 4: r0 is tried first (fewer free) but holds only one 4-GPU pod; r1 holds both
    (pods,) = place_sequence(FOUR_NODES_TWO_RACKS, held, [{"job_id": 2, "arrival": 0, "duration": 1, "pods": 2, "gpus_per_pod": 4}])
    assert pods == [[W("n2", g) for g in range(4)], [W("n3", g) for g in range(4)]]
    # 2 x 2 fits r0: pod 0 best fit n0 (2 free), pod 1 n1
    (pods,) = place_sequence(FOUR_NODES_TWO_RACKS, held, [{"job_id": 3, "arrival": 0, "duration": 1, "pods": 2, "gpus_per_pod": 2}])
    assert pods == [[W("n0", 2), W("n0", 3)], [W("n1", 0), W("n1", 1)]]
    # 3 x 4 fits no rack: the whole cluster, best fit node by node (n1, n2, n3)
    (pods,) = place_sequence(FOUR_NODES_TWO_RACKS, held, [{"job_id": 4, "arrival": 0, "duration": 1, "pods": 3, "gpus_per_pod": 4}])
    assert pods == [[W("n1", g) for g in range(4)], [W("n2", g) for g in range(4)], [W("n3", g) for g in range(4)]]


@pytest.mark.points(2)
def test_mig_pods_fill_partitioned_gpus_first():
    nodes = [{"name": "a", "num_gpus": 2}]
    jobs = [{"job_id": 1, "arrival": 0, "duration": 1, "mig_profile": "3g.71gb"},
            {"job_id": 2, "arrival": 0, "duration": 1, "mig_profile": "1g.18gb"},
            {"job_id": 3, "arrival": 0, "duration": 1, "mig_profile": "4g.71gb"},
            {"job_id": 4, "arrival": 0, "duration": 1, "mig_profile": "2g.35gb", "pods": 2},
            {"job_id": 5, "arrival": 0, "duration": 1, "mig_profile": "7g.141gb"},
            {"job_id": 6, "arrival": 0, "duration": 1, "pods": 1, "gpus_per_pod": 1}]
    out = place_sequence(nodes, {}, jobs)
    assert out[0] == [[["a", 0, "3g.71gb", 0]]]  # an empty GPU, lowest allowed start
    assert out[1] == [[["a", 0, "1g.18gb", 4]]]  # GPU 0 is in MIG use: its lowest free start
    assert out[2] == [[["a", 1, "4g.71gb", 0]]]  # slice 0 of GPU 0 is taken: GPU 1
    # 2g starts at 0, 2 or 4: on GPU 0 all overlap (3g on 0-3, 1g on 4); GPU 1 has 4 only: one pod
    assert out[3] is None, "two 2g instances do not fit: GPU 0 has no 2g start free, GPU 1 one (4)"
    assert out[4] is None and out[5] is None, "every GPU is in MIG use"


@pytest.mark.points(3)
@PROPERTY_SETTINGS
@given(seed=st.integers(0, 10_000))
def test_random_gangs_never_oversubscribe(seed):
    rng = random.Random(seed)
    nodes = [{"name": f"n{i}", "num_gpus": rng.choice([2, 4, 8]), "rack": f"r{i % 2}"} for i in range(rng.randint(1, 4))]
    for n in nodes:
        if n["num_gpus"] == 8 and rng.random() < 0.5:
            n["islands"] = [[0, 1, 2, 3], [4, 5, 6, 7]]
    profiles = ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb", "1g.18gb+me"]
    jobs = []
    for jid in range(12):
        if rng.random() < 0.3:
            jobs.append({"job_id": jid, "arrival": 0, "duration": 1, "pods": rng.randint(1, 3), "mig_profile": rng.choice(profiles)})
        else:
            jobs.append({"job_id": jid, "arrival": 0, "duration": 1, "pods": rng.randint(1, 3), "gpus_per_pod": rng.choice([1, 2, 4]),
                             "tp_scope": rng.choice(["island", "node", "any"])})
    by_id = {j["job_id"]: j for j in jobs}
    table = _node_table(nodes)
    for placed, alloc, whole, mig in random_bind_release(nodes, jobs, seed):
        alloc = {int(k): v for k, v in alloc.items()}
        check_allocations(by_id, alloc, table, f"seed {seed}")
        expect_whole = sorted([[s[0], s[1]], jid] for jid, pods in alloc.items() for pod in pods for s in pod if s[2] is None)
        assert whole == expect_whole
        for key, layout in mig.items():
            assert oracle_valid(layout)
            node, gpu = key.split(":")
            assert sorted(layout) == sorted((s[2], s[3]) for pods in alloc.values() for pod in pods for s in pod
                                            if s[0] == node and s[1] == int(gpu) and s[2] is not None)


@pytest.mark.points(2)
def test_best_fit_compares_the_nodes_free_gpus_before_the_islands():
    # Node a: 8 GPUs in islands (0-3), (4-7); J1 holds a0, a1 -> island a0 has 2 free, a1 has 4: node a 6 free.
    # Node b: 4 GPUs, one island; J2 holds b0 -> 3 free. A 1x2 pod (scope island): candidates
    # (node free, island free) = a/island0 (6, 2), a/island1 (6, 4), b (3, 3): b wins, GPUs b1, b2.
    # (Comparing the island first would pick a's island 0, leaving node b's hole unused.)
    nodes = [{"name": "a", "num_gpus": 8, "rack": "r0", "islands": ((0, 1, 2, 3), (4, 5, 6, 7))},
             {"name": "b", "num_gpus": 4, "rack": "r0"}]
    held = {1: [[["a", 0], ["a", 1]]], 2: [[["b", 0]]]}
    [pods] = place_sequence(nodes, held, [dict(job_id=3, arrival=0.0, duration=1.0, pods=1, gpus_per_pod=2)])
    assert pods == [[["b", 1, None, None], ["b", 2, None, None]]]


@in_worker
def bind_outcome(nodes: list[dict], pods: list) -> list:
    """Bind `pods` as job 7 on an empty cluster: [the error's type name or None, the jobs bound after]."""
    cluster = Cluster(ClusterSpec(tuple(NodeSpec(**n) for n in nodes)))
    try:
        cluster.bind(7, tuple(tuple(tuple(s) for s in pod) for pod in pods))
    except Exception as e:  # noqa: BLE001  the type is the answer
        return [type(e).__name__, sorted(cluster.allocations)]
    return [None, sorted(cluster.allocations)]


@pytest.mark.points(1)
@pytest.mark.parametrize("slot", [["n0", -1], ["n0", 4], ["n0", 9], ["n9", 0]],
                         ids=["gpu -1", "gpu = num_gpus", "gpu past num_gpus", "unknown node"])
def test_bind_refuses_a_gpu_the_node_does_not_have_with_a_value_error(slot):
    """Every GPU index outside 0 .. num_gpus - 1 and every unknown node: ValueError, nothing bound
    (not an IndexError or KeyError from inside, and not accepted)."""
    err, jobs = bind_outcome(FOUR_NODES_TWO_RACKS, [[["n1", 0]], [slot]])
    assert err == "ValueError" and jobs == [], f"bind of a pod on {slot}: raised {err}, jobs bound after: {jobs}"
