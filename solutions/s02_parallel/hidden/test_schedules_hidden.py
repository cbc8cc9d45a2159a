"""Schedule edge cases: fewer micro-batches than stages, one micro-batch, one stage, the in-flight
limit exactly met, odd validator inputs, and timelines with unequal forward and backward times
(oracles as in the public tests: hand-written schedules and an independent replay)."""

from __future__ import annotations

import pytest
from conftest import actions, rows
from parallel import (
    afab_schedule,
    bubble_fraction,
    one_f_one_b_schedule,
    simulate_schedule,
    validate_schedule,
)


@pytest.mark.points(2)
def test_1f1b_with_fewer_microbatches_than_stages_by_hand():
    assert rows(one_f_one_b_schedule(4, 2)) == ["F0 F1 B0 B1", "F0 F1 B0 B1", "F0 F1 B0 B1", "F0 B0 F1 B1"]
    assert rows(one_f_one_b_schedule(3, 1)) == ["F0 B0"] * 3
    assert rows(one_f_one_b_schedule(1, 3)) == ["F0 B0 F1 B1 F2 B2"]
    assert rows(afab_schedule(4, 1)) == ["F0 B0"] * 4


@pytest.mark.points(1)
def test_schedules_refuse_sizes_below_one():
    assert rows(afab_schedule(1, 1)) == ["F0 B0"]  # a working call first
    for p, m in ((0, 3), (3, 0), (-1, 2)):
        with pytest.raises(ValueError):
            one_f_one_b_schedule(p, m)
        with pytest.raises(ValueError):
            afab_schedule(p, m)
        with pytest.raises(ValueError):
            bubble_fraction(p, m)


@pytest.mark.points(2)
def test_validator_edge_cases():
    # the in-flight limit met exactly is allowed; one more is not
    validate_schedule(actions("F0 F1 F2 B0 B1 B2", "F0 F1 F2 B0 B1 B2"), 3, max_in_flight=3)
    with pytest.raises(ValueError):
        validate_schedule(actions("F0 F1 F2 B0 B1 B2", "F0 F1 F2 B0 B1 B2"), 3, max_in_flight=2)
    # the in-flight count is per stage, and a backward frees a slot before the next forward
    validate_schedule(actions("F0 F1 B0 F2 B1 B2", "F0 B0 F1 B1 F2 B2"), 3, max_in_flight=2)
    with pytest.raises(ValueError):
        validate_schedule([], 1)  # no stage at all
    with pytest.raises(ValueError):
        validate_schedule(actions("F0 B0", ""), 1)  # the last stage does nothing
    with pytest.raises(ValueError):
        # stage 0's B0 waits for stage 1's B0, which comes after stage 1's F1, which needs stage 0's F1
        validate_schedule(actions("F0 B0 F1 B1", "F0 F1 B0 B1", "F0 B0 F1 B1"), 2)
    validate_schedule(actions("F0 B0 F1 B1", "F0 B0 F1 B1", "F0 B0 F1 B1"), 2, max_in_flight=1)  # one at a time
    validate_schedule(actions("F0 F1 B0 B1", "F0 F1 B0 B1", "F0 B0 F1 B1"), 2, max_in_flight=3)


@pytest.mark.points(2)
def test_timeline_of_three_stages_with_slow_backwards_by_hand():
    t = simulate_schedule(actions("F0 F1 B0 B1", "F0 B0 F1 B1"), forward_time=1.0, backward_time=3.0)
    # stage 1: F0 at 1, B0 at 2 (ends 5), F1 at 5 (stage 0's F1 ended at 2), B1 at 6 (ends 9);
    # stage 0: F0 0, F1 1, B0 waits for stage 1's B0 (5), B1 waits for stage 1's B1 (9), ends 12
    assert t.start == [[0.0, 1.0, 5.0, 9.0], [1.0, 2.0, 5.0, 6.0]]
    assert t.makespan == pytest.approx(12.0, rel=1e-12)
    assert t.busy == pytest.approx([8.0, 8.0], rel=1e-12)
    assert t.bubble_fraction == pytest.approx(1 - 16 / 24, rel=1e-12)  # (p-1)/(m+p-1) = 1/3
    one = simulate_schedule(actions("F0 B0 F1 B1"), forward_time=2.0, backward_time=0.5)
    assert one.start == [[0.0, 2.0, 2.5, 4.5]] and one.makespan == pytest.approx(5.0) and one.bubble_fraction == 0.0


@pytest.mark.points(1)
def test_simulate_refuses_a_backward_waiting_for_a_forward_that_never_runs():
    simulate_schedule(actions("F0 B0"), forward_time=1.0, backward_time=2.0)  # positive times: it runs
    with pytest.raises(ValueError):
        simulate_schedule(actions("F0 F1 B0 B1", "F0 B0 B1"))
    for times in ((1.0, 0.0), (0.0, 2.0), (-1.0, 2.0), (1.0, -2.0)):  # each time alone must be positive
        with pytest.raises(ValueError):
            simulate_schedule(actions("F0 B0"), forward_time=times[0], backward_time=times[1])


@pytest.mark.points(1)
def test_bubble_shrinks_with_more_microbatches():
    assert bubble_fraction(8, 1) == pytest.approx(7 / 8, rel=1e-12)
    assert bubble_fraction(8, 8) == pytest.approx(7 / 15, rel=1e-12)
    assert bubble_fraction(8, 64) == pytest.approx(7 / 71, rel=1e-12)
    assert bubble_fraction(2, 1) == pytest.approx(0.5, rel=1e-12)
