"""The analysis of README "Analysis": each number in answers/fault_numbers.toml against the same
quantity recomputed here from the student's own Supervisor and commit_checkpoint on analysis.py's
trace (the grader's own copy of analysis.py), and Young/Daly's interval from its constants."""

from __future__ import annotations

import pytest
from analysis import young_daly_steps

from autograder.testing import in_worker, numeric_answer


@in_worker
def replay_in_package(every: int) -> dict:
    from analysis import replay

    return replay(every)


QUANTITIES = {
    "wall_hours_every_50": lambda: replay_in_package(50)["wall_hours"],
    "wall_hours_every_200": lambda: replay_in_package(200)["wall_hours"],
    "wall_hours_every_500": lambda: replay_in_package(500)["wall_hours"],
    "young_daly_steps": young_daly_steps,
}
COUNTS = {
    "lost_steps_every_50": lambda: replay_in_package(50)["lost_steps"],
    "lost_steps_every_500": lambda: replay_in_package(500)["lost_steps"],
}


@pytest.mark.points(1)
@pytest.mark.parametrize("key", sorted(QUANTITIES))
def test_numeric_answer_matches_your_replay(key, request, tol):
    got = numeric_answer(request.config.rootpath, "fault_numbers", key)
    want = QUANTITIES[key]()
    assert got == pytest.approx(want, rel=tol("numeric answer")["rtol"]), f"{key}: you wrote {got}, your code gives {want:.4g}"


@pytest.mark.points(1)
@pytest.mark.parametrize("key", sorted(COUNTS))
def test_numeric_count_matches_your_replay(key, request, tol):
    got = numeric_answer(request.config.rootpath, "fault_numbers", key)
    want = COUNTS[key]()
    assert abs(got - want) <= tol("numeric answer, count")["atol"], f"{key}: you wrote {got}, your code gives {want}"
