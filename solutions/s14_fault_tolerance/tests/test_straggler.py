"""find_stragglers on step times the judge makes up: a rank slow on every step is named; a rank
with one very long step (a checkpoint stall) and a rank slightly slower than the rest are not (the
median, not the mean, and the factor); every input checked with the valid case beside it."""

from __future__ import annotations

import pytest
from faulttol import find_stragglers


def times(steps: int, ranks: int, slow: dict[int, float], spike: dict[int, float] | None = None) -> list[list[float]]:
    """0.1 s a step plus a little rank-and-step jitter; slow[r] multiplies rank r; spike[r] is one long step."""
    rows = [[0.1 * (1 + 0.01 * ((3 * s + 7 * r) % 5)) * slow.get(r, 1.0) for r in range(ranks)] for s in range(steps)]
    for r, seconds in (spike or {}).items():
        rows[steps // 2][r] = seconds
    return rows


@pytest.mark.points(1)
@pytest.mark.parametrize("ranks,slow_rank", [(4, 2), (8, 0), (3, 1)])
def test_a_rank_slow_on_every_step_is_named(ranks, slow_rank):
    got = find_stragglers(times(9, ranks, {slow_rank: 1.9}))
    assert got == [slow_rank], f"{ranks} ranks, rank {slow_rank} 1.9x slower on every step: got {got}"


@pytest.mark.points(2)
def test_one_long_step_or_a_slightly_slower_rank_is_not_a_straggler():
    data = times(9, 4, {3: 1.3}, spike={1: 5.0})  # rank 1: one 5 s step (50x); rank 3: 1.3x < 1.5x
    got = find_stragglers(data)
    assert got == [], f"rank 1 had one 5 s step (its median is normal), rank 3 is 1.3x (< factor 1.5): got {got}"
    assert find_stragglers(data, factor=1.2) == [3], "with factor 1.2 rank 3 (1.3x every step) must be named"


@pytest.mark.points(1)
def test_bad_step_times_are_refused_and_the_valid_case_works():
    for bad, why in (([], "no step"), ([[0.1, 0.2], [0.1]], "ragged rows")):
        with pytest.raises(ValueError):
            find_stragglers(bad)
    with pytest.raises(ValueError):
        find_stragglers(times(3, 2, {}), factor=1.0)
    assert find_stragglers(times(3, 2, {})) == []
