"""The GEMMs of the committed attention-block trace on a roofline: shapes from the recorded inputs,
FLOPs from torch's own flop formulas, bytes from the operand sizes, peaks measured on the same H200
(datasets/profiles/device.json)."""

from __future__ import annotations

import pytest
import torch
from conftest import raw_calls, raw_events, raw_gpu, w_roofline
from torch.utils.flop_counter import mm_flop

import coursedata


@pytest.mark.points(4)
def test_gemm_shapes_flops_and_bytes_of_the_attention_block():
    dev = coursedata.profile_device()
    got = w_roofline(str(coursedata.profile_path("p6_attention_block")), dev["bf16_gemm_flops_per_s"],
                     dev["copy_bytes_per_s"])
    mms = [e for e in raw_events("p6_attention_block") if e["name"] == "aten::mm"]
    assert [g[0] for g in got] == ["aten::mm"] * len(mms)
    for g, e in zip(got, sorted(mms, key=lambda e: e["ts"])):
        a, b = e["args"]["Input Dims"][:2]
        assert g[2:5] == [a[0], b[1], a[1]]
        assert g[8] == mm_flop(torch.Size(a), torch.Size(b))
        assert g[9] == 2 * (a[0] * a[1] + b[0] * b[1] + a[0] * b[1])


@pytest.mark.points(3)
def test_kernel_time_bound_and_roof_of_each_gemm():
    dev = coursedata.profile_device()
    peak, bw = dev["bf16_gemm_flops_per_s"], dev["copy_bytes_per_s"]
    got = w_roofline(str(coursedata.profile_path("p6_attention_block")), peak, bw)
    calls = raw_calls("p6_attention_block")
    mms = sorted((e for e in raw_events("p6_attention_block") if e["name"] == "aten::mm"), key=lambda e: e["ts"])
    for g, op in zip(got, mms):
        inside = [k for k in raw_gpu("p6_attention_block")
                  if op["ts"] <= calls[k["args"]["correlation"]]["ts"] <= op["ts"] + op["dur"]]
        assert g[6] == pytest.approx(sum(k["dur"] for k in inside), abs=0.01)
        ai = g[8] / g[9]
        assert g[10] == pytest.approx(ai)
        assert g[11] == pytest.approx(g[8] / (g[6] * 1e-6))
        assert g[12] == pytest.approx(min(peak, ai * bw))
        assert g[13] == ("memory" if ai < peak / bw else "compute")
