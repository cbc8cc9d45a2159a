"""Hidden: small synthetic traces with planted structure, each built to catch one mistake."""

from __future__ import annotations

import json

import pytest
from conftest import (
    TraceBuilder,
    w_breakdown,
    w_enclosing,
    w_gap_cause,
    w_gaps,
    w_kernels,
    w_launches,
    w_load,
    w_raises,
    w_roofline,
    w_time_by_op,
)


def two_streams(tmp_path, suffix=".json") -> str:
    """Stream 7: k1 [0, 10), k3 [40, 50); stream 9: long [5, 30) overlapping k1; a memcpy [60, 62)."""
    t = TraceBuilder()
    t.launch(-20, "k1", 0, 10)
    t.launch(-15, "long", 5, 25, stream=9)
    t.launch(-10, "k3", 40, 10)
    t.launch(-5, "Memcpy DtoH (Device -> Pinned)", 60, 2, call="cudaMemcpyAsync", cat="gpu_memcpy")
    return t.write(tmp_path / f"two{suffix}")


@pytest.mark.points(2)
def test_load_reads_gzip_and_drops_non_complete_events(tmp_path):
    got = w_load(two_streams(tmp_path, ".json.gz"))
    assert len(got) == 8 and all(g[1] for g in got)
    assert w_raises("load_trace", str(tmp_path / "two.json.gz")) is None


@pytest.mark.points(1)
def test_a_file_that_is_not_a_trace_is_refused(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"events": []}))
    assert w_raises("load_trace", str(tmp_path / "x.json"))


@pytest.mark.points(1)
def test_an_enclosing_range_sorts_before_what_it_contains(tmp_path):
    t = TraceBuilder()
    t.op("inner", 5, 1)
    t.op("outer", 5, 10)
    got = w_load(t.write(tmp_path / "t.json"))
    assert [g[0] for g in got] == ["outer", "inner"]


@pytest.mark.points(3)
def test_overlapping_streams_count_once_and_copies_are_not_compute(tmp_path):
    got = w_breakdown(two_streams(tmp_path))
    assert got["span"] == pytest.approx(62)
    assert got["busy"] == pytest.approx(30 + 10 + 2)
    assert got["idle"] == pytest.approx(20)
    assert got["compute"] == pytest.approx(40)


@pytest.mark.points(1)
def test_a_trace_without_gpu_events_is_refused(tmp_path):
    t = TraceBuilder()
    t.op("aten::mm", 0, 10)
    assert w_raises("temporal_breakdown", t.write(tmp_path / "cpu.json"))


@pytest.mark.points(3)
def test_gaps_across_streams_name_the_event_that_really_ended_last(tmp_path):
    """k1 ends at 10 inside `long` (stream 9, ends at 30): the first gap is [30, 40) after `long`."""
    got = w_gaps(two_streams(tmp_path))
    assert [(g[0], g[1]) for g in got] == [(30, 40), (50, 60)]
    assert got[0][2][0] == "long" and got[0][3][0] == "k3"


@pytest.mark.points(2)
def test_a_long_kernel_started_first_hides_the_end_of_a_short_one(tmp_path):
    """long [0, 30) on stream 9 starts before short [5, 10) on stream 7: the gap is [30, 40), not [10, 40)."""
    t = TraceBuilder()
    t.launch(-20, "long", 0, 30, stream=9)
    t.launch(-15, "short", 5, 5)
    t.launch(-10, "next", 40, 10)
    got = w_gaps(t.write(tmp_path / "t.json"))
    assert [(g[0], g[1], g[2][0]) for g in got] == [(30, 40, "long")]


@pytest.mark.points(1)
def test_back_to_back_kernels_leave_no_gap(tmp_path):
    t = TraceBuilder()
    t.launch(0, "a", 10, 5)
    t.launch(1, "b", 15, 5)
    t.launch(2, "c", 21, 5)
    assert [(g[0], g[1]) for g in w_gaps(t.write(tmp_path / "t.json"))] == [(20, 21)]


@pytest.mark.points(2)
def test_kernel_table_counts_copies_by_their_names(tmp_path):
    got = w_kernels(two_streams(tmp_path))
    assert got["Memcpy DtoH (Device -> Pinned)"][:2] == [1, pytest.approx(2)]
    assert set(got) == {"k1", "long", "k3", "Memcpy DtoH (Device -> Pinned)"}


def launches_case(tmp_path) -> str:
    t = TraceBuilder()
    t.launch(0, "triton_k", 20, 5, call="cuLaunchKernelEx", call_dur=8)
    t.launch(30, "late_call_k", 33, 5, call_dur=6)       # starts before its call returns: delay 0
    t.gpu("orphan", 50, 5, corr=999)                      # no host call in the trace
    return t.write(tmp_path / "l.json")


@pytest.mark.points(3)
def test_launch_delay_is_clipped_and_an_orphan_has_no_call(tmp_path):
    got = {g[0][0]: g for g in w_launches(launches_case(tmp_path))}
    assert got["triton_k"][2][:2] == ["cuLaunchKernelEx", "cuda_driver"]
    assert got["triton_k"][3] == pytest.approx(12)
    assert got["late_call_k"][3] == 0
    assert got["orphan"][2] is None and got["orphan"][3] is None


def ops_case(tmp_path) -> tuple[str, dict]:
    t = TraceBuilder()
    t.op("aten::linear", 0, 100)
    t.op("aten::addmm", 10, 50)
    mm = t.launch(20, "gemm", 200, 10)
    t.op("other_thread_op", 0, 1000, tid=2)               # another thread: never the enclosing op
    free = t.launch(150, "orphan_k", 300, 7)              # outside every op on its thread
    g = t.launch(400, "replayed", 410, 3, call="cudaGraphLaunch")
    t.gpu("replayed_2", 414, 4, g)
    t.op("edge_op", 500, 10)
    edge = t.launch(500, "edge_k", 520, 1, call_dur=10)   # the call fills the op exactly
    t.gpu("lost", 600, 2, corr=12345)
    return t.write(tmp_path / "ops.json"), {"mm": mm, "free": free, "edge": edge}


@pytest.mark.points(3)
def test_the_enclosing_op_is_the_innermost_on_the_same_thread(tmp_path):
    path, corr = ops_case(tmp_path)
    assert w_enclosing(path, corr["mm"])[0] == "aten::addmm"
    assert w_enclosing(path, corr["free"]) is None
    assert w_enclosing(path, corr["edge"])[0] == "edge_op"


@pytest.mark.points(2)
def test_time_by_op_names_graph_replays_and_lost_work(tmp_path):
    path, _ = ops_case(tmp_path)
    got = w_time_by_op(path)
    assert got == {"aten::addmm": pytest.approx(10), "<cudaLaunchKernel>": pytest.approx(7),
                   "<cudaGraphLaunch>": pytest.approx(7), "edge_op": pytest.approx(1), "<unknown>": pytest.approx(2)}


def cause_case(tmp_path, other_thread: bool, short: bool) -> str:
    t = TraceBuilder()
    t.launch(0, "a", 10, 10)
    if other_thread:
        t.op("busy_elsewhere", 15, 300, tid=2, cat="user_annotation")
    t.op("tokenizer.decode", 25, 40 if short else 150, cat="user_annotation")
    t.launch(190, "b", 200, 10)
    return t.write(tmp_path / "c.json")


@pytest.mark.points(2)
def test_a_cause_must_be_on_the_launching_thread(tmp_path):
    got = w_gap_cause(cause_case(tmp_path, other_thread=True, short=False))
    assert got["gap"][:2] == [20, 200] and got["cause"][0] == "tokenizer.decode"


@pytest.mark.points(2)
def test_the_cause_is_on_the_thread_that_launched_the_work_after_the_gap(tmp_path):
    """The kernel before the gap came from a side thread (2) busy in a long range; the kernel after it
    from the main thread (1), which spent the gap in the tokenizer."""
    t = TraceBuilder()
    t.op("side.loader", 0, 400, tid=2, cat="user_annotation")
    t.launch(5, "a", 10, 10, tid=2)
    t.op("tokenizer.decode", 30, 150, tid=1, cat="user_annotation")
    t.launch(190, "b", 200, 10, tid=1)
    got = w_gap_cause(t.write(tmp_path / "threads.json"))
    assert got["gap"][:2] == [20, 200] and got["cause"][0] == "tokenizer.decode"


@pytest.mark.points(2)
def test_a_host_event_covering_less_than_half_the_gap_is_not_its_cause(tmp_path):
    got = w_gap_cause(cause_case(tmp_path, other_thread=True, short=True))
    assert got["cause"] is None


@pytest.mark.points(1)
def test_a_host_event_covering_exactly_half_the_gap_is_its_cause(tmp_path):
    """The rule is "at least half": aten::foo [5, 15) covers [10, 15) of the gap [10, 20), exactly half."""
    t = TraceBuilder()
    t.launch(-5, "a", 0, 10)
    t.op("aten::foo", 5, 10)
    t.launch(18, "b", 20, 5)
    got = w_gap_cause(t.write(tmp_path / "half.json"))
    assert got["gap"][:2] == [10, 20] and got["cause"] is not None and got["cause"][0] == "aten::foo", got


@pytest.mark.points(1)
def test_a_gap_of_exactly_min_us_is_not_longer_than_min_us(tmp_path):
    """gaps(min_us) keeps the idle intervals *longer* than min_us: [10, 20) is 10 us, not longer than 10."""
    t = TraceBuilder()
    t.launch(0, "a", 0, 10)
    t.launch(1, "b", 20, 5)
    t.launch(2, "c", 40, 5)
    path = t.write(tmp_path / "t.json")
    assert [(g[0], g[1]) for g in w_gaps(path, 10.0)] == [(25, 40)]
    assert [(g[0], g[1]) for g in w_gaps(path, 9.999)] == [(10, 20), (25, 40)]


@pytest.mark.points(1)
def test_of_equal_gaps_the_first_is_the_largest(tmp_path):
    t = TraceBuilder()
    t.launch(0, "a", 10, 10)
    t.launch(1, "b", 50, 10)      # gap [20, 50)
    t.launch(2, "c", 90, 10)      # gap [60, 90): as long
    assert w_gap_cause(t.write(tmp_path / "t.json"))["gap"][:2] == [20, 50]


@pytest.mark.points(1)
def test_a_gpu_that_never_idles_has_no_largest_gap(tmp_path):
    t = TraceBuilder()
    t.launch(0, "a", 10, 10)
    assert "error" in w_gap_cause(t.write(tmp_path / "t.json"))


def gemm_case(tmp_path, shapes: bool = True) -> str:
    t = TraceBuilder()
    dims = {"Input Dims": [[64], [8, 32], [32, 64]], "Input type": ["float", "float", "float"]} if shapes else {}
    t.op("aten::addmm", 0, 50, **dims)
    t.launch(5, "gemm_a", 100, 4)
    t.launch(10, "splitKreduce_kernel", 105, 1)
    t.op("aten::bmm", 60, 20, **{"Input Dims": [[3, 16, 8], [3, 8, 4]], "Input type": ["c10::Half", "c10::Half"]})
    t.launch(62, "bmm_k", 120, 2)
    t.op("aten::mm", 90, 5, **{"Input Dims": [[2, 2], [2, 2]], "Input type": ["float", "float"]})  # no GPU work
    return t.write(tmp_path / "g.json")


@pytest.mark.points(3)
def test_addmm_and_bmm_shapes_bias_and_dtype(tmp_path):
    got = w_roofline(gemm_case(tmp_path), 1e12, 1e11)
    assert [g[0] for g in got] == ["aten::addmm", "aten::bmm"]
    addmm, bmm = got
    assert addmm[1:8] == [1, 8, 64, 32, 4, pytest.approx(5), 64]
    assert addmm[8] == 2 * 8 * 64 * 32 and addmm[9] == 4 * (8 * 32 + 32 * 64 + 8 * 64 + 64)
    assert bmm[1:6] == [3, 16, 4, 8, 2]
    assert bmm[8] == 2 * 3 * 16 * 4 * 8 and bmm[9] == 2 * 3 * (16 * 8 + 8 * 4 + 16 * 4)


@pytest.mark.points(2)
def test_the_bound_flips_at_the_ridge(tmp_path):
    path = gemm_case(tmp_path)
    ai = (2 * 8 * 64 * 32) / (4 * (8 * 32 + 32 * 64 + 8 * 64 + 64))
    below = w_roofline(path, ai * 1e11 * 1.01, 1e11)[0]   # ridge just above the intensity
    above = w_roofline(path, ai * 1e11 * 0.99, 1e11)[0]
    assert (below[13], above[13]) == ("memory", "compute")
    at = w_roofline(path, ai, 1.0)[0]                     # ridge == intensity exactly: not below it
    assert at[13] == "compute"
    assert below[12] == pytest.approx(ai * 1e11) and above[12] == pytest.approx(ai * 1e11 * 0.99)


@pytest.mark.points(1)
def test_a_trace_without_shapes_is_refused(tmp_path):
    assert w_raises("gemm_ops", gemm_case(tmp_path, shapes=False))
