"""Hidden, GPU: a trace recorded in the test, on this GPU, with a planted host stall. Oracles:
torch.profiler's own in-memory events (kernel names and device durations, read without the JSON),
and the stall planted by the test (a record_function range around a 20 ms sleep)."""

from __future__ import annotations

import time

import pytest
import torch
from conftest import w_gap_cause, w_kernels, w_roofline
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

STALL_S = 0.02


def record(path) -> profile:
    a = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.nn.functional.silu(a @ w)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        for _ in range(3):
            y = torch.nn.functional.silu(a @ w)
        with record_function("planted.stall"):
            time.sleep(STALL_S)
        torch.mm(y, w)
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(path))
    return prof


@pytest.mark.gpu
@pytest.mark.points(3)
def test_a_fresh_trace_kernel_table_matches_the_profilers_own_events(tmp_path):
    prof = record(tmp_path / "fresh.json")
    ref: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA and not e.name.startswith("Memset"):
            ref.setdefault(e.name, []).append(e.device_time)
    got = w_kernels(str(tmp_path / "fresh.json"))
    for name, durs in ref.items():
        assert name in got, name
        assert got[name][0] == len(durs), name
        assert got[name][1] == pytest.approx(sum(durs), rel=1e-3, abs=0.01), name


@pytest.mark.gpu
@pytest.mark.points(3)
def test_a_fresh_trace_finds_the_planted_stall(tmp_path):
    record(tmp_path / "fresh.json")
    got = w_gap_cause(str(tmp_path / "fresh.json"))
    start, end = got["gap"][:2]
    assert end - start >= STALL_S * 1e6, f"largest gap {end - start:.0f} us, the planted stall is {STALL_S * 1e6:.0f} us"
    assert got["cause"][0] == "planted.stall"


@pytest.mark.gpu
@pytest.mark.points(2)
def test_a_fresh_trace_gemms_on_the_roofline(tmp_path):
    record(tmp_path / "fresh.json")
    got = w_roofline(str(tmp_path / "fresh.json"), 989e12, 4.8e12)
    assert [g[2:6] for g in got] == [[256, 4096, 4096, 2]] * 4
    assert all(g[13] == "compute" for g in got)  # 2*256*4096^2 FLOPs over 2*(2*256*4096 + 4096^2) bytes: 228 FLOP/B > 206
