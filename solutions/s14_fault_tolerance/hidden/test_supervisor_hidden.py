"""The supervisor's bookkeeping, tick by tick: a node that finished (exit 0) is neither failed nor
killed, beats of an old generation do not keep a node of the new one alive, a second failure
restarts again on fewer nodes, and more failures than max_restarts stop the job."""

from __future__ import annotations

import pytest
from checks import judge_commit
from conftest import new_supervisor, supervisor_launch, supervisor_tick


@pytest.mark.points(1)
def test_a_node_that_finished_is_not_failed_when_it_falls_silent(tmp_path):
    sup = new_supervisor(5.0, 1, 3, [0, 1], str(tmp_path))
    supervisor_launch(sup, 0.0)
    assert supervisor_tick(sup, 1.0, [(0, 0, 1, 1.0), (1, 0, 1, 1.0)], {1: 0}) == []
    for t in range(2, 12):  # node 1 finished and is silent; node 0 goes on beating
        assert supervisor_tick(sup, float(t), [(0, 0, 2, float(t))], {}) == [], f"t={t}: node 1 exited 0, not failed"
    assert supervisor_tick(sup, 12.0, [], {0: 0}) == [("stop", "finished")]


@pytest.mark.points(2)
def test_old_generation_beats_do_not_hide_a_hang_and_a_second_failure_restarts_again(tmp_path):
    judge_commit(tmp_path, 6, {"state.pt": b"6" * 64})
    sup = new_supervisor(5.0, 1, 3, [0, 1, 2], str(tmp_path))
    supervisor_launch(sup, 0.0)
    actions = supervisor_tick(sup, 1.0, [(0, 0, 7, 1.0), (1, 0, 7, 1.0)], {2: 137})
    assert actions[-1] == ("launch", {0: 0, 1: 1}, 2, 6, 1), actions
    judge_commit(tmp_path, 8, {"state.pt": b"8" * 64})
    for t in (2.0, 3.0, 4.0, 5.0, 6.0):  # node 1's killed generation-0 process still beats; generation 1 is silent
        assert supervisor_tick(sup, t, [(0, 1, 9, t), (1, 0, 7, t)], {}) == [], t
    actions = supervisor_tick(sup, 6.5, [(0, 1, 9, 6.5)], {})
    assert actions and actions[-1] == ("launch", {0: 0}, 1, 8, 2), (
        f"node 1 never beat in generation 1 (launched at t=1): failed at t=6.5 (timeout 5 s); got {actions}")


@pytest.mark.points(1)
def test_more_failures_than_max_restarts_stop_the_job(tmp_path):
    sup = new_supervisor(5.0, 1, 1, [0, 1, 2], str(tmp_path))
    supervisor_launch(sup, 0.0)
    assert supervisor_tick(sup, 1.0, [], {0: 1})[-1][0] == "launch"
    actions = supervisor_tick(sup, 2.0, [], {1: 1})
    assert actions[0] == ("kill", (1, 2)) and actions[-1][0] == "stop", (
        f"second failure with max_restarts=1: expected a kill of (1, 2) and a stop, got {actions}")
