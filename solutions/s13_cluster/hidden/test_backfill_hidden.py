"""Backfill and FIFO edge cases worked by hand."""

from __future__ import annotations

import pytest
from conftest import job, nodes_of, sim, starts_ends


@pytest.mark.points(3)
def test_backfill_may_run_past_the_reservation_on_gpus_the_head_does_not_need(tol):
    # Three nodes a, b, c of 4. J0, J1 t=0 1x4 for 10 (a, b). J2 t=1 2x4 for 5: blocked, S = 10
    # (at 10 a and b are free; best fit puts the gang on a, b). J3 t=2 1x4 for 20 fits c now and
    # runs past S, but with J3 on c the head still fits a, b at 10: backfilled.
    trace = [job(0, 0, 10, 1, 4), job(1, 0, 10, 1, 4), job(2, 1, 5, 2, 4), job(3, 2, 20, 1, 4)]
    records, summary, _ = sim(nodes_of(4, 4, 4), trace, "easy")
    assert starts_ends(records) == {0: (0, 10), 1: (0, 10), 2: (10, 15), 3: (2, 22)}
    assert summary["mean_wait"] == pytest.approx(9 / 4, **tol("utilisation, wait"))
    # FIFO: J3 waits for J2 (t=10: J2 on a, b; J3 on c 10-30)
    records, summary, _ = sim(nodes_of(4, 4, 4), trace, "fifo")
    assert starts_ends(records) == {0: (0, 10), 1: (0, 10), 2: (10, 15), 3: (10, 30)}
    assert summary["mean_wait"] == pytest.approx(17 / 4, **tol("utilisation, wait"))
    # busy 40 + 40 + 40 + 80 = 200 GPU-s on 12 GPUs: 22 s vs 30 s
    assert summary["utilisation"] == pytest.approx(200 / (12 * 30), **tol("utilisation, wait"))


@pytest.mark.points(2)
def test_fifo_is_strict_even_when_a_later_job_fits():
    # One node of 4. J0 t=0 1x3 for 5; J1 t=1 1x2 for 1 (blocked: 1 free); J2 t=2 1x1 for 1 (fits,
    # but FIFO holds it behind J1). t=5: J1 0,1 and J2 on 2 (best fit, lowest free).
    trace = [job(0, 0, 5, 1, 3), job(1, 1, 1, 1, 2), job(2, 2, 1, 1, 1)]
    records, _, _segments = sim(nodes_of(4), trace, "fifo")
    assert starts_ends(records) == {0: (0, 5), 1: (5, 6), 2: (5, 6)}
    # EASY: J2 on GPU 3 from 2 to 3 ends before S = 5: backfilled
    records, _, _ = sim(nodes_of(4), trace, "easy")
    assert starts_ends(records) == {0: (0, 5), 1: (5, 6), 2: (2, 3)}


@pytest.mark.points(2)
def test_head_keeps_its_reservation_across_passes():
    # One node of 4. J0 t=0 1x2 for 10 (0, 1). Head J1 t=1 1x4 for 2: S = 10.
    # J2 t=2 1x1 for 8 (ends 10 <= S): backfilled on GPU 2. J3 t=3 1x1 for 7: ends 10: backfilled on 3.
    # J4 t=4 1x1 for 1: nothing free. t=10: J0, J2, J3 end; J1 10-12, then J4 12-13.
    trace = [job(0, 0, 10, 1, 2), job(1, 1, 2, 1, 4), job(2, 2, 8), job(3, 3, 7), job(4, 4, 1)]
    records, _, _ = sim(nodes_of(4), trace, "easy")
    assert starts_ends(records) == {0: (0, 10), 1: (10, 12), 2: (2, 10), 3: (3, 10), 4: (12, 13)}
    # one second longer and J3 (ends 11) would delay the head: at 10 GPU 3 would still be busy. It
    # waits; GPU 3 stays free, so J4 (ends 5 <= S) is backfilled there at 4. t=10: J1; t=12: J3.
    trace[3] = job(3, 3, 8)
    records, _, _ = sim(nodes_of(4), trace, "easy")
    assert starts_ends(records) == {0: (0, 10), 1: (10, 12), 2: (2, 10), 3: (12, 20), 4: (4, 5)}


@pytest.mark.points(1)
def test_segments_that_start_together_come_by_job_id():
    # One node of 2, FIFO: J0 (1 GPU, 3 s) and J1 (1 GPU, 2 s) both start at 1; J1 ends first, so
    # completion order would list it first: the result promises (start, job_id) order.
    _, _, segments = sim(nodes_of(2), [job(0, 1, 3), job(1, 1, 2)], "fifo")
    assert [(s[0], s[1], s[2]) for s in segments] == [(0, 1, 4), (1, 1, 3)]
