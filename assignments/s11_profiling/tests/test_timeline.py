"""The GPU's timeline of the committed H200 traces against Holistic Trace Analysis on the same file,
and merge_intervals against a direct union on small cases. Tolerance "trace time": 0.01 us."""

from __future__ import annotations

import pytest
from conftest import hta_kernels, hta_temporal, raw_events, w_breakdown, w_kernels, w_load, w_merge

import coursedata


@pytest.mark.points(2)
def test_load_keeps_every_complete_event_in_time_order():
    got = w_load(str(coursedata.profile_path("p6_attention_block")))
    raw = raw_events("p6_attention_block")
    assert len(got) == len(raw)
    assert sorted((g[0], g[2]) for g in got) == sorted((e["name"], e["ts"]) for e in raw)
    starts = [g[2] for g in got]
    assert starts == sorted(starts)


@pytest.mark.points(2)
@pytest.mark.parametrize("intervals, union", [
    ([(0, 2), (1, 3), (5, 6)], [(0, 3), (5, 6)]),
    ([(5, 6), (0, 1)], [(0, 1), (5, 6)]),
    ([(0, 1), (1, 2)], [(0, 2)]),                  # touching intervals merge
    ([(0, 10), (2, 3), (4, 5)], [(0, 10)]),        # nested
    ([], []),
])
def test_merge_intervals(intervals, union):
    assert [tuple(iv) for iv in w_merge([list(iv) for iv in intervals])] == union


@pytest.mark.points(4)
def test_idle_and_compute_time_match_hta_on_the_eager_decode_trace(tol):
    got = w_breakdown(str(coursedata.profile_path("p1_decode_eager")))
    ref = hta_temporal("p1_decode_eager")
    for key in ("span", "idle", "compute"):
        assert got[key] == pytest.approx(ref[key], **tol("trace time")), key
    assert got["busy"] + got["idle"] == pytest.approx(got["span"], **tol("trace time"))
    assert got["frac"] == pytest.approx(ref["idle"] / ref["span"], abs=1e-6)


@pytest.mark.points(4)
def test_kernel_table_matches_hta_on_the_eager_decode_trace(tol):
    got = w_kernels(str(coursedata.profile_path("p1_decode_eager")))
    ref = hta_kernels("p1_decode_eager")
    assert set(got) == set(ref)
    for name, (count, total, lo, hi) in ref.items():
        c, t, mean, mn, mx = got[name]
        assert c == count, name
        assert t == pytest.approx(total, **tol("trace time")), name
        assert (mn, mx) == (pytest.approx(lo, **tol("trace time")), pytest.approx(hi, **tol("trace time"))), name
        assert mean == pytest.approx(total / count, **tol("trace time")), name
