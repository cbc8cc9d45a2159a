"""Quota rules by hand: usage is per queue, a queue over its quota cannot reclaim, borrowing is
judged per queue, victims are chosen in the stated order."""

from __future__ import annotations

import pytest
from conftest import job, nodes_of, sim, starts_ends


@pytest.mark.points(3)
def test_quota_is_counted_per_queue():
    # Three nodes a, b, c of 4; quotas A: 4, B: 4, C: 4.
    # t=0: J0 (A) on a, J1 (B) on b, J2 (B) on c: B borrows (usage 8 > 4).
    # t=1: J3 (A) fits nowhere. A's usage is 4 (J0): 4 + 4 > 4, so A is not within quota and may
    #      not reclaim B's borrowed GPUs (no lower-priority job in A either): J3 waits.
    # t=2: J3 still cannot. J4 (C) is within quota (0 + 4 <= 4): B borrows, victim J2 (latest
    #      start 0, highest id) -> J4 on c 2-5. J2 (pending again) is over B's quota: waits.
    # t=5: J4 ends. J2 (arrival 0) is taken before J3 (arrival 1) and fits c: 5-25.
    # t=20: J0 and J1 end; J3 on a (best fit tie) 20-25.
    trace = [job(0, 0, 20, 1, 4, queue="A"), job(1, 0, 20, 1, 4, queue="B"), job(2, 0, 20, 1, 4, queue="B"),
             job(3, 1, 5, 1, 4, queue="A"), job(4, 2, 3, 1, 4, queue="C")]
    records, summary, _ = sim(nodes_of(4, 4, 4), trace, "priority", {"A": 4, "B": 4, "C": 4})
    assert starts_ends(records) == {0: (0, 20), 1: (0, 20), 2: (5, 25), 3: (20, 25), 4: (2, 5)}
    assert summary["preemptions"] == 1 and records[2][4] == 1


@pytest.mark.points(2)
def test_a_queue_at_its_quota_is_not_borrowing():
    # Quotas A: 4, B: 4 on two nodes of 4. J1 (A, priority 5, taken first) on a; J0 (B) on b; both at quota.
    # J2 (A, priority 9) at t=1: A is at 4 + 4 > 4, so only A's lower-priority J1 is eligible;
    # preempting it brings A to 0 + 4 <= 4 and frees a: J2 on a 1-4, J1 back at 4-14.
    # B's J0 (priority 0, not borrowing) is never touched.
    trace = [job(0, 0, 10, 1, 4, queue="B"), job(1, 0, 10, 1, 4, queue="A", priority=5),
             job(2, 1, 3, 1, 4, queue="A", priority=9)]
    records, _, _segments = sim(nodes_of(4, 4), trace, "priority", {"A": 4, "B": 4})
    assert starts_ends(records) == {0: (0, 10), 1: (4, 14), 2: (1, 4)}
    assert [r[4] for _, r in sorted(records.items())] == [0, 1, 0]


@pytest.mark.points(2)
def test_victims_lowest_priority_then_latest_start():
    # One node of 8, queue q (quota 8). J0 (prio 0) 0-.., J1 (prio 1) at 1, J2 (prio 0) at 2, each
    # 1x2, and J3 (prio 0) 1x2 at 3: 8 GPUs busy. J4 (prio 2) 1x2 at 4: victims in order
    # (priority, latest start, highest id): J3 (prio 0, start 3) first; it frees 2 GPUs and q
    # is within quota without it (6 + 2 <= 8), J3 alone is preempted. J4 4-6; J3 restarts at 6.
    trace = [job(0, 0, 20, 1, 2, queue="q"), job(1, 1, 20, 1, 2, queue="q", priority=1),
             job(2, 2, 20, 1, 2, queue="q"), job(3, 3, 20, 1, 2, queue="q"),
             job(4, 4, 2, 1, 2, queue="q", priority=2)]
    records, _, _ = sim(nodes_of(8), trace, "priority", {"q": 8})
    assert starts_ends(records) == {0: (0, 20), 1: (1, 21), 2: (2, 22), 3: (6, 26), 4: (4, 6)}


@pytest.mark.points(2)
def test_no_reclaim_from_a_queue_within_its_quota():
    # Two nodes of 4, quotas A: 4, B: 8. J0 (B) 1x4 on a, J1 (B) 1x2 on b0, b1 (best fit: b).
    # B uses 6 <= 8: not borrowing. J2 (A, 1x4) at 1: nothing fits, A within quota (0 + 4 <= 4), but
    # no eligible victim (B is not borrowing) -> waits until 10: J0 ends, J2 on a 10-15.
    trace = [job(0, 0, 10, 1, 4, queue="B"), job(1, 0, 30, 1, 2, queue="B"), job(2, 1, 5, 1, 4, queue="A")]
    records, summary, _ = sim(nodes_of(4, 4), trace, "priority", {"A": 4, "B": 8})
    assert starts_ends(records) == {0: (0, 10), 1: (0, 30), 2: (10, 15)}
    assert summary["preemptions"] == 0


@pytest.mark.points(2)
def test_borrowing_is_judged_after_each_victim():
    # One node of 4; quotas X: 2, Y: 4. J0, J1 (X, 1x2 each) at 0: X uses 4 > 2, borrowing by 2.
    # J2 (Y, priority 5, 1x4) at 1: nothing is free. Victims in order (priority, latest start, highest
    # id): J1 first (X uses 4 - 0 = 4 > 2: eligible); 2 GPUs free, J2 needs 4. Next J0: X's usage minus
    # the victims chosen so far is 4 - 2 = 2, not above its quota: not eligible. No prefix frees 4 GPUs,
    # so nobody is preempted: J2 waits for both to end at 10 and runs 10-13.
    trace = [job(0, 0, 10, 1, 2, queue="X"), job(1, 0, 10, 1, 2, queue="X"),
             job(2, 1, 3, 1, 4, queue="Y", priority=5)]
    records, summary, _ = sim(nodes_of(4), trace, "priority", {"X": 2, "Y": 4})
    assert starts_ends(records) == {0: (0, 10), 1: (0, 10), 2: (10, 13)}
    assert summary["preemptions"] == 0


@pytest.mark.points(2)
def test_a_victim_restarts_in_the_same_pass_when_its_turn_has_not_come():
    # Two nodes of 4 (a, b), quota A: 3 (C unlisted: 0). t=2: J0 (A, 2x1, scope node) on a 0, 1;
    # J1 (C, 2x3, scope any) on a 2, 3 + b 0 and b 1-3: all 8 busy, C borrowing (6 > 0).
    # t=3: J2 (A, priority 2, 2x1 node) fits nowhere. Victims by (priority, latest start, highest id):
    # J1 (C borrowing): the gang fits, but A would hold 2 + 2 = 4 > 3; then J0 (A, lower priority):
    # A at 2 - 2 + 2 <= 3. Both preempted; J2 on a 0, 1 (3-5). J0 and J1 rejoin the pass after J2 in
    # (priority, arrival, id) order: J0 fits a 2, 3 and restarts at once (3-6); J1 does not fit and
    # C is never within its quota: it waits until J2 ends, 5-10.
    trace = [job(0, 2, 3, 2, 1, queue="A", priority=1, tp_scope="node"),
             job(1, 2, 5, 2, 3, queue="C", priority=1, tp_scope="any"),
             job(2, 3, 2, 2, 1, queue="A", priority=2, tp_scope="node")]
    records, summary, _ = sim(nodes_of(4, 4), trace, "priority", {"A": 3})
    assert starts_ends(records) == {0: (3, 6), 1: (5, 10), 2: (3, 5)}
    assert summary["preemptions"] == 2


@pytest.mark.points(2)
def test_a_job_started_in_this_pass_is_skipped_not_the_end_of_the_victims():
    # One node of 4; quotas A: 2, B: 2. J0 (B, 1x2) at 0. t=1: J1 (B, 1x2) is taken first (lower id)
    # and starts on the 2 free GPUs: B uses 4 > 2, borrowing. J2 (A, 1x2) finds nothing free; A is
    # within quota (0 + 2 <= 2). Victims in order (priority, latest start, highest id): J1 started in
    # this very pass, so it is skipped, and the scan goes on to J0 (B borrowing: eligible), whose 2
    # GPUs let J2 start: J2 1-4, J0 back at 4-14.
    trace = [job(0, 0, 10, 1, 2, queue="B"), job(1, 1, 10, 1, 2, queue="B"), job(2, 1, 3, 1, 2, queue="A")]
    records, summary, _ = sim(nodes_of(4), trace, "priority", {"A": 2, "B": 2})
    assert starts_ends(records) == {0: (4, 14), 1: (1, 11), 2: (1, 4)}
    assert summary["preemptions"] == 1


@pytest.mark.points(1)
def test_a_queue_without_a_quota_never_reclaims():
    # One node of 2; quota B: 1 (C unlisted: 0). J0, J1 (B, 1x1) at 0: B borrows one GPU. J2 (C, 1x1)
    # at 1: 0 + 1 > 0, so C is not within its quota and may not preempt: it waits for J0 at 10.
    trace = [job(0, 0, 10, 1, 1, queue="B"), job(1, 0, 12, 1, 1, queue="B"), job(2, 1, 3, 1, 1, queue="C")]
    records, summary, _ = sim(nodes_of(2), trace, "priority", {"B": 1})
    assert starts_ends(records) == {0: (0, 10), 1: (0, 12), 2: (10, 13)}
    assert summary["preemptions"] == 0
