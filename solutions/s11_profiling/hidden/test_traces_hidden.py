"""Hidden: the other committed traces against HTA and the raw JSON (tolerance "trace time": 0.01 us)."""

from __future__ import annotations

import pytest
from conftest import (
    hta_kernels,
    hta_launches,
    hta_temporal,
    raw_calls,
    raw_events,
    raw_gpu,
    rule,
    w_breakdown,
    w_gap_cause,
    w_kernels,
    w_launches,
    w_roofline,
    w_shares,
)

import coursedata


@pytest.mark.points(2)
@pytest.mark.parametrize("name", ["p1_decode_graphs", "p6_attention_block"])
def test_breakdown_matches_hta(name, tol):
    got, ref = w_breakdown(str(coursedata.profile_path(name))), hta_temporal(name)
    for key in ("span", "idle", "compute"):
        assert got[key] == pytest.approx(ref[key], **tol("trace time")), key


@pytest.mark.points(2)
@pytest.mark.parametrize("name", ["p1_decode_graphs", "p6_attention_block"])
def test_kernel_table_matches_hta(name, tol):
    got, ref = w_kernels(str(coursedata.profile_path(name))), hta_kernels(name)
    assert set(got) == set(ref)
    for n, (count, total, lo, hi) in ref.items():
        assert got[n][0] == count and got[n][1] == pytest.approx(total, **tol("trace time")), n
        assert got[n][3] == pytest.approx(lo, **tol("trace time")) and got[n][4] == pytest.approx(hi, **tol("trace time"))


@pytest.mark.points(3)
def test_every_launch_of_the_eager_decode_step_is_joined(tol):
    """HTA joins 146 runtime launches; the other 420 are cuLaunchKernelEx (Triton and cuBLAS)."""
    name = "p1_decode_eager"
    got = {g[1]: g for g in w_launches(str(coursedata.profile_path(name)))}
    calls = raw_calls(name)
    assert len(got) == len(raw_gpu(name))
    for corr, (cpu_dur, gpu_dur, delay) in hta_launches(name).items():
        assert got[corr][2][3] == pytest.approx(cpu_dur, **tol("trace time"))
        assert got[corr][3] == pytest.approx(delay, **tol("trace time"))
    for corr, (_, _, call, delay) in got.items():
        c = calls[corr]
        assert call[:2] == [c["name"], c["cat"]]
        assert delay == pytest.approx(max(0.0, got[corr][0][2] - c["ts"] - c["dur"]), **tol("trace time"))


@pytest.mark.points(2)
@pytest.mark.parametrize("name", ["p1_decode_graphs", "p6_attention_block"])
def test_shares_match_hta_grouped_by_the_rules(name):
    got = w_shares(str(coursedata.profile_path(name)))
    sums: dict[str, float] = {}
    for n, (_, total, _, _) in hta_kernels(name).items():
        sums[rule(n)] = sums.get(rule(n), 0.0) + total
    for cat, share in got.items():
        assert share == pytest.approx(sums.get(cat, 0.0) / sum(sums.values()), abs=1e-9), cat
    assert sum(got.values()) == pytest.approx(1.0)


@pytest.mark.points(3)
def test_roofline_of_the_eager_decode_step():
    """226 GEMMs (113 per step); cuBLAS's split-K GEMMs launch a reduction kernel inside the same aten::mm."""
    name = "p1_decode_eager"
    dev = coursedata.profile_device()
    got = w_roofline(str(coursedata.profile_path(name)), dev["bf16_gemm_flops_per_s"], dev["copy_bytes_per_s"])
    mms = sorted((e for e in raw_events(name) if e["name"] == "aten::mm"), key=lambda e: e["ts"])
    assert len(got) == len(mms) == 226
    calls = raw_calls(name)
    tid = mms[0]["tid"]
    for g, op in zip(got, mms):
        a, b = op["args"]["Input Dims"][:2]
        assert g[2:6] == [a[0], b[1], a[1], 2]
        inside = [k["dur"] for k in raw_gpu(name) if calls[k["args"]["correlation"]]["tid"] == tid
                  and op["ts"] <= calls[k["args"]["correlation"]]["ts"] <= op["ts"] + op["dur"]]
        assert g[6] == pytest.approx(sum(inside), abs=0.01)
    assert {g[13] for g in got} == {"memory"}  # batch-32 decode GEMMs: about 30 FLOP/byte, far below the ridge


@pytest.mark.points(3)
@pytest.mark.parametrize("name", ["p1_decode_eager", "p1_decode_graphs"])
def test_largest_gap_and_its_cause_on_the_decode_traces(name):
    """The union of the GPU events, and the cause by the rule of gap_cause, both computed by the test."""
    got = w_gap_cause(str(coursedata.profile_path(name)))
    gpu = sorted(raw_gpu(name), key=lambda e: e["ts"])
    spans, end = [], None
    for e in gpu:
        if end is not None and e["ts"] > end:
            spans.append((end, e["ts"]))
        end = e["ts"] + e["dur"] if end is None else max(end, e["ts"] + e["dur"])
    start, stop = max(spans, key=lambda s: s[1] - s[0])
    assert got["gap"][:2] == pytest.approx([start, stop], abs=1e-6)
    after = next(e for e in gpu if e["ts"] == stop)
    call = raw_calls(name)[after["args"]["correlation"]]
    host = [e for e in raw_events(name) if e["tid"] == call["tid"] and e.get("cat") in
            ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function")
            and min(e["ts"] + e["dur"], stop) - max(e["ts"], start) >= (stop - start) / 2]
    cause = min(host, key=lambda e: (e["dur"], -e["ts"]))
    assert got["cause"][:2] == [cause["name"], cause["cat"]]
