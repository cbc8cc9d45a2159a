"""Topology-aware placement worked by hand: best fit on nodes, TP groups inside one NVLink island
or node, all-or-nothing gangs and atomic binding."""

from __future__ import annotations

import pytest
from clustersim import Cluster, ClusterSpec, Job, NodeSpec, place_gang, place_pod

from autograder.testing import in_worker


def _cluster(nodes: list[dict], held: dict) -> Cluster:
    cluster = Cluster(ClusterSpec(tuple(NodeSpec(**n) for n in nodes)))
    for jid, pods in held.items():
        cluster.bind(jid, tuple(tuple(tuple(s) for s in pod) for pod in pods))
    return cluster


def _plain(pods):
    return None if pods is None else [list(s) for s in pods]


@in_worker
def pod_on(nodes: list[dict], held: dict, need: int, scope: str) -> list | None:
    """place_pod on a cluster holding `held`; the slots as [node, gpu, profile, start] lists."""
    cluster = _cluster(nodes, held)
    return _plain(place_pod(cluster, need, scope, [n["name"] for n in nodes]))


@in_worker
def gang_on(nodes: list[dict], held: dict, job: dict) -> list:
    """[the gang's pods (or None), the cluster's allocations after the call]."""
    cluster = _cluster(nodes, held)
    pods = place_gang(cluster, Job(**job))
    after = {jid: [_plain(p) for p in pods_] for jid, pods_ in cluster.allocations.items()}
    return [None if pods is None else [_plain(p) for p in pods], after]


@in_worker
def bind_conflict(nodes: list[dict], held: dict, pods: list) -> list:
    """Bind `pods` as job 99; [the error's type name or None, the allocations and whole map after]."""
    cluster = _cluster(nodes, held)
    err = None
    try:
        cluster.bind(99, tuple(tuple(tuple(s) for s in pod) for pod in pods))
    except ValueError as e:
        err = type(e).__name__
    return [err, sorted(cluster.allocations), sorted([list(k), v] for k, v in cluster.whole.items()),
            sorted([list(k), g.layout()] for k, g in cluster.mig.items())]


TWO_BY_FOUR = [{"name": "a", "num_gpus": 4}, {"name": "b", "num_gpus": 4}]
SPLIT_NODE = [{"name": "a", "num_gpus": 8, "islands": [[0, 1, 2, 3], [4, 5, 6, 7]]}]


@pytest.mark.points(2)
def test_best_fit_keeps_the_emptier_node_whole():
    # a holds 2 busy GPUs: a 2-GPU pod goes to a (2 free < 4 free), keeping b whole
    held = {1: [[["a", 0], ["a", 1]]]}
    assert pod_on(TWO_BY_FOUR, held, 2, "node") == [["a", 2, None, None], ["a", 3, None, None]]
    # a 3-GPU pod cannot fit a any more: b, lowest GPUs first
    assert pod_on(TWO_BY_FOUR, held, 3, "node") == [["b", 0, None, None], ["b", 1, None, None], ["b", 2, None, None]]
    # on an empty cluster the tie goes to the first node
    assert pod_on(TWO_BY_FOUR, {}, 1, "node") == [["a", 0, None, None]]


@pytest.mark.points(2)
def test_tp_group_never_split_across_nodes_unless_scope_any():
    held = {1: [[["a", 0], ["a", 1]]], 2: [[["b", 2], ["b", 3]]]}  # 2 free GPUs on each node
    assert pod_on(TWO_BY_FOUR, held, 4, "node") is None
    assert pod_on(TWO_BY_FOUR, held, 4, "island") is None
    # scope "any": nodes by (free GPUs, order) -> a (2 free) then b (2 free), lowest GPUs first
    assert pod_on(TWO_BY_FOUR, held, 4, "any") == [["a", 2, None, None], ["a", 3, None, None],
                                                   ["b", 0, None, None], ["b", 1, None, None]]


@pytest.mark.points(2)
def test_tp_group_inside_one_nvlink_island():
    # GPUs 0, 1 and 4 busy: island 0 has {2, 3} free, island 1 has {5, 6, 7}
    held = {1: [[["a", 0], ["a", 1], ["a", 4]]]}
    assert pod_on(SPLIT_NODE, held, 3, "island") == [["a", 5, None, None], ["a", 6, None, None], ["a", 7, None, None]]
    # best fit among islands of the node: island 0 (2 free) before island 1 (3 free)
    assert pod_on(SPLIT_NODE, held, 2, "island") == [["a", 2, None, None], ["a", 3, None, None]]
    # 4 GPUs fit the node (2, 3, 5, 6) but no island
    assert pod_on(SPLIT_NODE, held, 4, "island") is None
    assert pod_on(SPLIT_NODE, held, 4, "node") == [["a", 2, None, None], ["a", 3, None, None],
                                                   ["a", 5, None, None], ["a", 6, None, None]]
    # across nodes the node's free count decides first: a (8 GPUs, islands 0-3 and 4-7) has 6 free,
    # b (4 GPUs) has 2 free -> a 2-GPU pod goes to b
    two = SPLIT_NODE + [{"name": "b", "num_gpus": 4}]
    held = {1: [[["a", 0], ["a", 4]]], 2: [[["b", 0], ["b", 1]]]}
    assert pod_on(two, held, 2, "island") == [["b", 2, None, None], ["b", 3, None, None]]
    # b full; on a, island 1 has 2 free (6, 7) and island 0 has 3 (1, 2, 3): best fit is island 1
    held = {1: [[["a", 0], ["a", 4], ["a", 5]]], 2: [[["b", g] for g in range(4)]]}
    assert pod_on(two, held, 2, "island") == [["a", 6, None, None], ["a", 7, None, None]]


@pytest.mark.points(2)
def test_gang_is_all_or_nothing():
    held = {1: [[["a", 0]]]}  # a has 3 free, b has 4
    pods, after = gang_on(TWO_BY_FOUR, held, {"job_id": 5, "arrival": 0, "duration": 1, "pods": 2, "gpus_per_pod": 4})
    assert pods is None, "the second pod does not fit: no placement at all"
    assert after == {1: [[["a", 0, None, None]]]}, "place_gang must not bind anything"
    pods, after = gang_on(TWO_BY_FOUR, held, {"job_id": 5, "arrival": 0, "duration": 1, "pods": 2, "gpus_per_pod": 2})
    # pod 0: best fit a (3 free) -> a0? no, a0 is busy: a1, a2; pod 1: a has 1 free, b 4 -> b0, b1
    assert pods == [[["a", 1, None, None], ["a", 2, None, None]], [["b", 0, None, None], ["b", 1, None, None]]]
    assert after == {1: [[["a", 0, None, None]]]}


@pytest.mark.points(2)
def test_bind_is_atomic():
    held = {1: [[["b", 1]]]}
    # the first pod is free, the second collides with job 1 on b1: nothing may be bound
    err, jobs, whole, mig = bind_conflict(TWO_BY_FOUR, held, [[["a", 0], ["a", 1]], [["b", 0], ["b", 1]]])
    assert err == "ValueError" and jobs == [1] and whole == [[["b", 1], 1]] and mig == []
    # a MIG instance that would overlap, after a valid one: nothing bound either
    err, jobs, whole, mig = bind_conflict(TWO_BY_FOUR, held, [[["a", 0, "3g.71gb", 0]], [["a", 0, "2g.35gb", 2]]])
    assert err == "ValueError" and jobs == [1] and mig == []
    # a GPU twice in one gang
    err, jobs, _, _ = bind_conflict(TWO_BY_FOUR, held, [[["a", 0]], [["a", 0]]])
    assert err == "ValueError" and jobs == [1]
    # and a valid gang binds
    err, jobs, whole, mig = bind_conflict(TWO_BY_FOUR, held, [[["a", 0, "3g.71gb", 0]], [["a", 0, "3g.71gb", 4]]])
    assert err is None and jobs == [1, 99] and mig == [[["a", 0], [("3g.71gb", 0), ("3g.71gb", 4)]]]
