"""Launch joins: HTA's launch statistics are the oracle for the runtime-API launches; the driver-API
launches (cuBLAS and Triton kernels through cuLaunchKernelEx), which HTA skips, are checked against
the raw JSON. Tolerance "trace time": 0.01 us."""

from __future__ import annotations

import pytest
from conftest import hta_launches, raw_calls, raw_gpu, w_launches, w_time_by_op

import coursedata


@pytest.mark.points(4)
def test_runtime_launches_match_hta(tol):
    got = {g[1]: g for g in w_launches(str(coursedata.profile_path("p6_attention_block")))}
    ref = hta_launches("p6_attention_block")
    assert ref
    for corr, (cpu_dur, gpu_dur, delay) in ref.items():
        gpu, _, call, d = got[corr]
        assert call is not None, f"correlation {corr}: no call"
        assert call[3] == pytest.approx(cpu_dur, **tol("trace time"))
        assert gpu[3] == pytest.approx(gpu_dur, **tol("trace time"))
        assert d == pytest.approx(delay, **tol("trace time"))


@pytest.mark.points(4)
def test_driver_api_launches_are_joined_too():
    """cuBLAS's nvjet GEMMs and the Triton flash kernel are launched with cuLaunchKernelEx."""
    name = "p6_attention_block"
    got = w_launches(str(coursedata.profile_path(name)))
    calls = raw_calls(name)
    assert len(got) == len(raw_gpu(name))
    driver = [g for g in got if calls[g[1]]["cat"] == "cuda_driver"]
    assert driver, "the trace has driver-API launches"
    for gpu, corr, call, _ in got:
        assert call is not None and call[0] == calls[corr]["name"] and call[2] == calls[corr]["ts"], gpu[0]


@pytest.mark.points(3)
def test_a_graph_replay_owns_every_kernel_it_replays():
    """With CUDA graphs the decode step's kernels correlate with cudaGraphLaunch, outside any operator."""
    name = "p1_decode_graphs"
    by_op = w_time_by_op(str(coursedata.profile_path(name)))
    calls = raw_calls(name)
    replayed = sum(e["dur"] for e in raw_gpu(name) if calls[e["args"]["correlation"]]["name"] == "cudaGraphLaunch")
    assert by_op.get("<cudaGraphLaunch>") == pytest.approx(replayed, abs=0.01)
    assert "aten::mm" not in by_op
    assert sum(by_op.values()) == pytest.approx(sum(e["dur"] for e in raw_gpu(name)), abs=0.01)
