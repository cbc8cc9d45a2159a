"""Priority with per-queue quotas and preemption, on traces worked by hand (rule: quota.py's
docstring and the handout)."""

from __future__ import annotations

import pytest
from conftest import job, nodes_of, sim, starts_ends


@pytest.mark.points(3)
def test_higher_priority_preempts_lower_in_its_queue(tol):
    # Two nodes a, b of 4; queue q with quota 8.
    # t=0: J1 (priority 1) is taken first -> a; J0 (priority 0) -> b.
    # t=2: J2 (priority 1) fits nowhere. q's usage 8 + 4 > 8: it needs victims from q of lower
    #      priority: J0 (priority 0) is the only eligible one; J1 (equal priority) is not.
    #      Without J0: usage 4 + 4 <= 8 and b is free -> J0 is preempted, J2 runs on b 2-7.
    # t=7: J2 ends, J0 restarts from scratch on b: 7-17.
    trace = [job(0, 0, 10, 1, 4, priority=0, queue="q"), job(1, 0, 10, 1, 4, priority=1, queue="q"),
             job(2, 2, 5, 1, 4, priority=1, queue="q")]
    records, summary, segments = sim(nodes_of(4, 4), trace, "priority", {"q": 8})
    assert starts_ends(records) == {0: (7, 17), 1: (0, 10), 2: (2, 7)}
    assert records[0][4] == 1 and records[1][4] == 0 and records[2][4] == 0
    assert [s[:3] + [s[4]] for s in segments if s[0] == 0] == [[0, 0, 2, True], [0, 7, 17, False]]
    pods = {(s[0], s[1]): s[3] for s in segments}
    node_a, node_b = [[["a", g, None, None] for g in range(4)]], [[["b", g, None, None] for g in range(4)]]
    assert pods[(1, 0)] == node_a and pods[(0, 0)] == node_b and pods[(2, 2)] == node_b and pods[(0, 7)] == node_b
    # wait = end - arrival - duration = 17 - 0 - 10 for J0; busy includes the 2 s J0 lost:
    # 4*2 + 4*10 + 4*10 + 4*5 = 108 GPU-s over 8 GPUs x 17 s
    assert summary["mean_wait"] == pytest.approx(7 / 3, **tol("utilisation, wait"))
    assert summary["preemptions"] == 1
    assert summary["utilisation"] == pytest.approx(108 / (8 * 17), **tol("utilisation, wait"))


@pytest.mark.points(2)
def test_equal_priority_is_never_preempted():
    # All priority 1 in queue q (quota 8). J0 on a, J1 on b. J2 at t=2 finds no victim of lower
    # priority: it waits for J0 (ends 10) and runs on a 10-13.
    trace = [job(0, 0, 10, 1, 4, priority=1, queue="q"), job(1, 1, 10, 1, 4, priority=1, queue="q"),
             job(2, 2, 3, 1, 4, priority=1, queue="q")]
    records, summary, _ = sim(nodes_of(4, 4), trace, "priority", {"q": 8})
    assert starts_ends(records) == {0: (0, 10), 1: (1, 11), 2: (10, 13)}
    assert summary["preemptions"] == 0


@pytest.mark.points(3)
def test_borrowed_capacity_is_reclaimed(tol):
    # Quotas A: 4, B: 4 on two nodes of 4.
    # t=0: J0, J1 of B start on a, b (the cluster is free: B borrows, usage 8 > 4).
    # t=5: J2 of A fits nowhere. A is within quota with it (0 + 4 <= 4); B is borrowing, so its jobs
    #      are eligible whatever their priority. Victim order: priority, then latest start, then
    #      highest id -> J1 (on b). Without it B is at 4 (no longer borrowing) and J2 fits b: 5-15.
    # t=15: J1 restarts on b (15-35). J0 ends at 20.
    trace = [job(0, 0, 20, 1, 4, queue="B"), job(1, 0, 20, 1, 4, queue="B"), job(2, 5, 10, 1, 4, queue="A")]
    records, summary, _ = sim(nodes_of(4, 4), trace, "priority", {"A": 4, "B": 4})
    assert starts_ends(records) == {0: (0, 20), 1: (15, 35), 2: (5, 15)}
    assert [r[4] for _, r in sorted(records.items())] == [0, 1, 0]
    assert summary["max_wait"] == pytest.approx(15, **tol("utilisation, wait"))
