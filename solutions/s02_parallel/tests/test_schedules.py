"""Pipeline schedules as per-stage action lists: AFAB (GPipe) and 1F1B, the validator, the timing
simulator and the bubble.

Oracles written here, independently: schedules worked by hand, a dependency checker and a replay
in simulated time (a recursion over each action's two predecessors, its stage's previous action
and the other stage's action it waits for), and the closed form (p - 1) / (m + p - 1).
"""

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


def replay(stages: list[str], tf: float, tb: float) -> list[list[float]] | None:
    """Start time of every action (None on a deadlock): an action starts when its stage's previous
    action and its dependency (F: previous stage's F; B: next stage's B, or the last stage's own F)
    have finished."""
    plan = [s.split() for s in stages]
    p = len(plan)
    where = {(s, tok): k for s in range(p) for k, tok in enumerate(plan[s])}
    finish: dict[tuple[int, int], float] = {}
    visiting: set[tuple[int, int]] = set()

    def end(s: int, k: int) -> float | None:
        if (s, k) in finish:
            return finish[(s, k)]
        if (s, k) in visiting:
            return None  # a cycle: each waits for the other
        visiting.add((s, k))
        kind, i = plan[s][k][0], plan[s][k][1:]
        deps = [(s, k - 1)] if k > 0 else []
        need = None
        if kind == "F" and s > 0:
            need = (s - 1, "F" + i)
        elif kind == "B":
            need = (s + 1, "B" + i) if s < p - 1 else (s, "F" + i)
        if need is not None:
            if need not in where:
                return None  # waits for an action that never runs
            deps.append((need[0], where[need]))
        times = [end(*d) for d in deps]
        if any(t is None for t in times):
            return None
        finish[(s, k)] = max(times, default=0.0) + (tf if plan[s][k][0] == "F" else tb)
        visiting.discard((s, k))
        return finish[(s, k)]

    starts = []
    for s in range(p):
        row = []
        for k, tok in enumerate(plan[s]):
            e = end(s, k)
            if e is None:
                return None
            row.append(e - (tf if tok[0] == "F" else tb))
        starts.append(row)
    return starts


def in_flight_peak(stage: str) -> int:
    held = peak = 0
    for tok in stage.split():
        held += 1 if tok[0] == "F" else -1
        peak = max(peak, held)
    return peak


def one_f_one_b_by_the_book(p: int, m: int) -> list[str]:
    """Megatron's forward_backward_pipelining_without_interleaving, written out."""
    out = []
    for s in range(p):
        w = min(p - s - 1, m)
        toks = [f"F{i}" for i in range(w)]
        for i in range(m - w):
            toks += [f"F{w + i}", f"B{i}"]
        out.append(" ".join(toks + [f"B{i}" for i in range(m - w, m)]))
    return out


@pytest.mark.points(1)
def test_afab_runs_every_forward_then_every_backward():
    assert rows(afab_schedule(3, 4)) == ["F0 F1 F2 F3 B0 B1 B2 B3"] * 3
    assert rows(afab_schedule(1, 1)) == ["F0 B0"]


@pytest.mark.points(2)
def test_1f1b_for_four_stages_and_six_microbatches_by_hand():
    assert rows(one_f_one_b_schedule(4, 6)) == [
        "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5",
        "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5",
        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5",
    ]


@pytest.mark.points(3)
def test_1f1b_respects_dependencies_and_holds_at_most_p_minus_s_microbatches():
    for p in range(1, 7):
        for m in range(1, 11):  # m < p included: the warm-up is cut short
            got = rows(one_f_one_b_schedule(p, m))
            assert got == one_f_one_b_by_the_book(p, m), f"p={p}, m={m}"
            assert replay(got, 1.0, 2.0) is not None, f"p={p}, m={m}: deadlock"
            assert [in_flight_peak(s) for s in got] == [min(p - s, m) for s in range(p)], f"p={p}, m={m}"
            afab = rows(afab_schedule(p, m))
            assert replay(afab, 1.0, 2.0) is not None and all(in_flight_peak(s) == m for s in afab)


@pytest.mark.points(2)
def test_validator_accepts_afab_and_1f1b_written_by_hand():
    for p, m in [(1, 1), (2, 3), (4, 6), (4, 2)]:
        validate_schedule(actions(*one_f_one_b_by_the_book(p, m)), m, max_in_flight=p)
        validate_schedule(actions(*[" ".join([f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)])] * p), m)
    # any backward order is legal if nothing waits in a cycle
    validate_schedule(actions("F0 F1 B1 B0", "F0 F1 B0 B1"), 2)


BROKEN = {
    "a backward before the next stage's backward (stage 0 waits for B0 of stage 1, which waits "
    "for F1 of stage 0)": (("F0 B0 F1 B1", "F0 F1 B0 B1"), 2, None),
    "a forward waiting for the previous stage in a cycle": (("F0 B0 F1 B1", "F1 F0 B0 B1"), 2, None),
    "a backward before its own forward": (("F0 F1 B0 B1", "B0 F0 F1 B1"), 2, None),
    "a micro-batch never run": (("F0 F1 B0 B1", "F0 F1 B0 B1"), 3, None),
    "a micro-batch run twice": (("F0 F0 F1 B0 B1", "F0 F1 B0 B1"), 2, None),
    "a micro-batch out of range": (("F0 F1 F2 B0 B1 B2", "F0 F1 F2 B0 B1 B2"), 2, None),
    "a backward missing on the last stage": (("F0 F1 B0 B1", "F0 F1 B0"), 2, None),
    "more micro-batches in flight than allowed": (("F0 F1 F2 B0 B1 B2", "F0 B0 F1 B1 F2 B2"), 3, 2),
}


@pytest.mark.points(3)
def test_validator_rejects_each_broken_schedule():
    validate_schedule(actions("F0 F1 B0 B1", "F0 B0 F1 B1"), 2, max_in_flight=2)  # the valid 1F1B, first
    for why, (stages, m, limit) in BROKEN.items():
        with pytest.raises(ValueError):
            validate_schedule(actions(*stages), m, max_in_flight=limit)
            pytest.fail(f"accepted a schedule with {why}: {stages}")


@pytest.mark.points(3)
@pytest.mark.parametrize("p,m,tf,tb", [(4, 8, 1.0, 2.0), (3, 2, 1.0, 1.0), (2, 5, 0.5, 1.5), (5, 5, 2.0, 1.0)])
def test_simulated_timeline_matches_an_independent_replay(p, m, tf, tb):
    # tolerances: sums of a few floats, exact but for rounding
    for stages in (one_f_one_b_by_the_book(p, m), [" ".join([f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)])] * p):
        want = replay(stages, tf, tb)
        got = simulate_schedule(actions(*stages), forward_time=tf, backward_time=tb)
        assert [len(r) for r in got.start] == [len(r) for r in want]
        for s, (row, row_want) in enumerate(zip(got.start, want)):
            assert row == pytest.approx(row_want, rel=1e-9, abs=1e-12), f"stage {s} of {stages}"
        makespan = max(want[s][-1] + (tf if stages[s].split()[-1][0] == "F" else tb) for s in range(p))
        assert got.makespan == pytest.approx(makespan, rel=1e-9, abs=1e-12)
        assert got.makespan == pytest.approx((m + p - 1) * (tf + tb), rel=1e-9, abs=1e-12)
        assert got.busy == pytest.approx([m * (tf + tb)] * p, rel=1e-9, abs=1e-12)
        assert got.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), rel=1e-9, abs=1e-12)


@pytest.mark.points(1)
def test_simulate_refuses_a_schedule_that_deadlocks():
    simulate_schedule(actions("F0 B0"))  # a single stage runs
    with pytest.raises(ValueError):
        simulate_schedule(actions("F0 B0 F1 B1", "F0 F1 B0 B1"))


@pytest.mark.points(2)
def test_bubble_fraction_is_p_minus_one_over_m_plus_p_minus_one():
    assert bubble_fraction(4, 8) == pytest.approx(3 / 11, rel=1e-12)
    assert bubble_fraction(8, 32) == pytest.approx(7 / 39, rel=1e-12)
    assert bubble_fraction(1, 5) == 0.0
    for p in range(1, 9):
        for m in range(1, 17):
            assert bubble_fraction(p, m) == pytest.approx((p - 1) / (m + p - 1), rel=1e-12, abs=1e-15)
