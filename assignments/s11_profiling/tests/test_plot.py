"""The roofline plot is a PNG written where asked."""

from __future__ import annotations

import pytest
from conftest import in_worker

import coursedata


@in_worker
def plot(trace: str, path: str) -> list:
    from traceprof import load_trace, plot_roofline, roofline

    dev = coursedata.profile_device()
    pts = roofline(load_trace(trace), dev["bf16_gemm_flops_per_s"], dev["copy_bytes_per_s"])
    out = plot_roofline(pts, dev["bf16_gemm_flops_per_s"], dev["copy_bytes_per_s"], path, title="attention block")
    return [str(out), len(pts)]


@pytest.mark.points(1)
def test_plot_roofline_writes_a_png(tmp_path):
    target = tmp_path / "roofline.png"
    out, n = plot(str(coursedata.profile_path("p6_attention_block")), str(target))
    assert out == str(target) and n == 4
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
