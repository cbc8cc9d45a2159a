"""Gaps and their causes on small synthetic traces whose gaps and host work are planted (so the
expected answer is known by construction), and the committed traces' gaps against the union of
their GPU intervals computed by the test."""

from __future__ import annotations

import pytest
from conftest import TraceBuilder, w_gap_cause, w_gaps


def planted_stall(tmp_path, stall: str = "sampler.sync") -> str:
    """Two kernels, then the host spends 500 us in `stall` (inside a step range) before launching the third."""
    t = TraceBuilder()
    t.op("engine.step", 0, 1000, cat="user_annotation")
    t.op("aten::mm", 10, 20)
    t.launch(12, "nvjet_gemm", 20, 30, call="cuLaunchKernelEx")
    t.op("aten::add", 40, 10)
    t.launch(42, "elementwise_add", 55, 5)
    t.op(stall, 60, 500, cat="user_annotation")
    t.op("cudaStreamSynchronize", 62, 490, cat="cuda_runtime")
    t.op("aten::mul", 570, 10)
    t.launch(572, "elementwise_mul", 580, 5)
    return t.write(tmp_path / "stall.json")


@pytest.mark.points(3)
def test_gaps_of_a_planted_trace(tmp_path):
    got = w_gaps(planted_stall(tmp_path))
    assert [(g[0], g[1]) for g in got] == [(50, 55), (60, 580)]
    assert (got[1][2][0], got[1][3][0]) == ("elementwise_add", "elementwise_mul")
    assert [(g[0], g[1]) for g in w_gaps(planted_stall(tmp_path), 10.0)] == [(60, 580)]


@pytest.mark.points(3)
def test_the_cause_of_the_largest_gap_is_the_innermost_host_event_covering_it(tmp_path):
    got = w_gap_cause(planted_stall(tmp_path))
    assert got["gap"][:2] == [60, 580]
    assert got["cause"][:2] == ["cudaStreamSynchronize", "cuda_runtime"]  # inside sampler.sync, inside the step
