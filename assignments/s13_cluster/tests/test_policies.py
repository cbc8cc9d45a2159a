"""FIFO and EASY backfill on traces whose schedules are worked out by hand, the two-gang deadlock,
and the head job's reservation."""

from __future__ import annotations

import pytest
from clustersim import Cluster, ClusterSpec, Job, NodeSpec, reservation_time
from conftest import job, nodes_of, sim, starts_ends

from autograder.testing import in_worker

# Trace A: two nodes a, b of 4 GPUs (one rack, each node one NVLink island).
#   J0 t=0 1x4 for 10; J1 t=1 2x4 for 5 (needs the whole cluster); J2 t=2 1x2 for 8; J3 t=3 1x2 for 6.
TRACE_A = [job(0, 0, 10, 1, 4), job(1, 1, 5, 2, 4), job(2, 2, 8, 1, 2), job(3, 3, 6, 1, 2)]


@pytest.mark.points(3)
def test_fifo_by_hand(tol):
    records, summary, _ = sim(nodes_of(4, 4), TRACE_A, "fifo")
    # t=0 J0 on a (tie: first node). t=1 J1 does not fit, and strict FIFO holds J2, J3 behind it.
    # t=10 J0 ends: J1 takes a and b until 15. t=15: J2 on a (tie) 15-23, J3 best fit on a too 15-21.
    assert starts_ends(records) == {0: (0, 10), 1: (10, 15), 2: (15, 23), 3: (15, 21)}
    # waits 0, 9, 13, 12 -> mean 34/4; busy 4*10 + 8*5 + 2*8 + 2*6 = 108 GPU-s over 8 GPUs x 23 s
    assert summary["mean_wait"] == pytest.approx(8.5, **tol("utilisation, wait"))
    assert summary["max_wait"] == pytest.approx(13, **tol("utilisation, wait"))
    assert summary["makespan"] == pytest.approx(23, **tol("utilisation, wait"))
    assert summary["utilisation"] == pytest.approx(108 / (8 * 23), **tol("utilisation, wait"))


@pytest.mark.points(3)
def test_easy_backfill_beats_fifo_on_the_same_trace(tol):
    records, summary, segments = sim(nodes_of(4, 4), TRACE_A, "easy")
    # t=1 J1 blocked; its reservation: J0 ends at 10, then a and b are free -> S = 10.
    # t=2 J2 fits b (b0, b1) and ends at 10 <= S: backfilled. t=3 J3 fits b2, b3, ends 9: backfilled.
    # t=10 J0 and J2 end, J1 runs 10-15.
    assert starts_ends(records) == {0: (0, 10), 1: (10, 15), 2: (2, 10), 3: (3, 9)}
    pods = {s[0]: s[3] for s in segments}
    assert pods[2] == [[["b", 0, None, None], ["b", 1, None, None]]]
    assert pods[3] == [[["b", 2, None, None], ["b", 3, None, None]]]
    # waits 0, 9, 0, 0 -> 2.25 (FIFO: 8.5); same 108 GPU-s over 8 x 15 (FIFO: 8 x 23)
    assert summary["mean_wait"] == pytest.approx(2.25, **tol("utilisation, wait"))
    assert summary["utilisation"] == pytest.approx(108 / 120, **tol("utilisation, wait"))
    assert summary["makespan"] == pytest.approx(15, **tol("utilisation, wait"))


@pytest.mark.points(3)
def test_backfill_never_delays_the_head():
    # Three nodes a, b, c of 4. J0 t=0 1x4 for 10 (a); J1 t=0 1x4 for 4 (b); J2 t=1 2x4 for 5 (head);
    # J3 t=2 1x2 for 2; J4 t=3 1x2 for 3.
    trace = [job(0, 0, 10, 1, 4), job(1, 0, 4, 1, 4), job(2, 1, 5, 2, 4), job(3, 2, 2, 1, 2), job(4, 3, 3, 1, 2)]
    records, _, segments = sim(nodes_of(4, 4, 4), trace, "easy")
    # t=1: J2 needs two whole nodes; only c is free. Reservation: J1 ends at 4 -> b, c free -> S = 4.
    # t=2: J3 fits c0, c1 and ends at 4 <= S: backfilled.
    # t=3: J4 fits c2, c3 but ends at 6: at 4 only b and half of c are free, J2 would wait for 6 > S:
    #      not backfilled (starting it would delay the head).
    # t=4: J1, J3 end; J2 on b and c until 9. J4 waits (a is J0's until 10) and starts at 9 on b0, b1.
    assert starts_ends(records) == {0: (0, 10), 1: (0, 4), 2: (4, 9), 3: (2, 4), 4: (9, 12)}
    pods = {s[0]: s[3] for s in segments}
    assert pods[2] == [[["b", g, None, None] for g in range(4)], [["c", g, None, None] for g in range(4)]]
    assert pods[4] == [[["b", 0, None, None], ["b", 1, None, None]]]


@pytest.mark.points(3)
@pytest.mark.parametrize("policy", ["fifo", "easy", "priority"])
def test_two_whole_cluster_gangs_do_not_deadlock(policy):
    # Both gangs need all 8 GPUs and arrive together: binding half of each would deadlock. One runs
    # (J0: equal priority, equal arrival -> lower id first), then the other; the recorded allocations
    # after every pass must never show a partial gang (checked by sim()).
    trace = [job(0, 0, 10, 2, 4), job(1, 0, 7, 2, 4)]
    records, summary, _ = sim(nodes_of(4, 4), trace, policy, {"default": 8})
    assert starts_ends(records) == {0: (0, 10), 1: (10, 17)}
    assert summary["preemptions"] == 0


@in_worker
def reservation(nodes: list[dict], running: list, head: dict, now: float) -> float:
    """running: [job dict, pods, end] bound on a fresh cluster; then reservation_time for head."""
    cluster = Cluster(ClusterSpec(tuple(NodeSpec(**n) for n in nodes)))
    ends = {}
    for j, pods, end in running:
        cluster.bind(j["job_id"], tuple(tuple(tuple(s) for s in pod) for pod in pods))
        ends[j["job_id"]] = end
    return reservation_time(cluster, ends, Job(**head), now)


@pytest.mark.points(2)
def test_reservation_time_by_hand():
    nodes = nodes_of(4, 4)
    running = [[job(1, 0, 10, 1, 2), [[["a", 0], ["a", 1]]], 10.0],
               [job(2, 0, 3, 1, 2), [[["b", 0], ["b", 1]]], 3.0],
               [job(3, 0, 6, 1, 1), [[["b", 2]]], 6.0]]
    # a has 2 free, b has 1: a 1x3 pod fits nowhere now. At 3 (J2 ends) b has b0, b1, b3 free -> 3.
    assert reservation(nodes, running, job(9, 0, 1, 1, 3), 1.0) == 3.0
    # 1x4 in one node: at 3 b still holds J3; at 6 b is whole -> 6.
    assert reservation(nodes, running, job(9, 0, 1, 1, 4), 1.0) == 6.0
    # 2x4: both nodes whole only after J1 ends at 10.
    assert reservation(nodes, running, job(9, 0, 1, 2, 4), 1.0) == 10.0
    # fits now -> now
    assert reservation(nodes, running, job(9, 0, 1, 1, 2), 1.0) == 1.0
