"""Roofline: ridge points, attainable FLOP/s and verdicts, checked against hand arithmetic."""

import pytest
from hwnumerics import (
    H100_SXM,
    H200,
    analyze,
    attainable_flops,
    attention_decode_workload,
    attention_prefill_workload,
    gemm_workload,
    gemv_workload,
    ridge_point,
)


@pytest.mark.points(2)
def test_ridge_points_of_h100_and_h200():
    # H100 SXM bf16: 989e12 FLOP/s / 3.35e12 B/s = 295.22 FLOP/byte
    assert ridge_point(H100_SXM, "bf16") == pytest.approx(989e12 / 3.35e12, rel=1e-12)
    assert ridge_point(H100_SXM, "bf16") == pytest.approx(295.22, abs=0.01)
    # H200: same compute, 4.8e12 B/s -> 206.04 FLOP/byte (faster memory lowers the ridge)
    assert ridge_point(H200, "bf16") == pytest.approx(206.04, abs=0.01)
    # fp8 doubles the peak: 1979e12 / 3.35e12 = 590.75
    assert ridge_point(H100_SXM, "fp8") == pytest.approx(590.75, abs=0.01)


@pytest.mark.points(1)
def test_attainable_flops_follows_the_memory_roof_below_the_ridge():
    # 100 FLOP/byte * 3.35e12 B/s = 3.35e14 FLOP/s, a third of the bf16 peak
    assert attainable_flops(H100_SXM, "bf16", 100.0) == pytest.approx(3.35e14, rel=1e-12)


@pytest.mark.points(1)
def test_attainable_flops_is_capped_by_the_peak_above_the_ridge():
    assert attainable_flops(H100_SXM, "bf16", 1000.0) == pytest.approx(989e12, rel=1e-12)


@pytest.mark.points(1)
def test_gemm_workload_counts_two_flops_per_multiply_add():
    w = gemm_workload(4096, 4096, 4096, dtype_bytes=2)
    assert w.flops == pytest.approx(2 * 4096**3, rel=1e-12)  # 137_438_953_472
    assert w.bytes == pytest.approx(3 * 4096**2 * 2, rel=1e-12)  # A, B read + C written: 100_663_296
    assert w.intensity == pytest.approx(1365.33, abs=0.01)  # 2 * 4096 / (3 * 2)


@pytest.mark.points(2)
def test_large_gemm_is_compute_bound_and_its_time_is_set_by_the_peak():
    p = analyze(gemm_workload(4096, 4096, 4096, dtype_bytes=2), H100_SXM, "bf16")
    assert p.bound == "compute"  # 1365 FLOP/byte > 295
    assert p.attainable_flops == pytest.approx(989e12, rel=1e-12)
    assert p.min_time_s == pytest.approx(2 * 4096**3 / 989e12, rel=1e-9)  # 138.97 us


@pytest.mark.points(2)
def test_batch_one_gemv_is_memory_bound_and_its_time_is_set_by_bandwidth():
    w = gemv_workload(8192, 8192, dtype_bytes=2)
    # flops = 2 * 8192 * 8192 = 134_217_728; bytes = (8192*8192 + 8192 + 8192) * 2 = 134_250_496
    assert w.flops == pytest.approx(134_217_728, rel=1e-12)
    assert w.bytes == pytest.approx(134_250_496, rel=1e-12)
    p = analyze(w, H100_SXM, "fp16")
    assert p.bound == "memory"
    assert p.intensity == pytest.approx(134_217_728 / 134_250_496, rel=1e-12)  # ~1 FLOP/byte
    assert p.attainable_flops == pytest.approx(3.35e12 * 134_217_728 / 134_250_496, rel=1e-9)
    assert p.min_time_s == pytest.approx(134_250_496 / 3.35e12, rel=1e-9)  # 40.07 us


@pytest.mark.points(1)
def test_attention_workloads_of_one_small_head_match_hand_counts():
    # prefill, batch 1, 2 heads, 8 tokens, head_dim 4, 2-byte elements:
    # flops = 4 * 1 * 2 * 8 * 8 * 4 = 2048; bytes = (2*1*2 [Q, O] + 2*1*2 [K, V]) * 8 * 4 * 2 = 512
    w = attention_prefill_workload(1, 2, 8, 4, dtype_bytes=2)
    assert (w.flops, w.bytes) == (pytest.approx(2048, rel=1e-12), pytest.approx(512, rel=1e-12))
    # decode against 8 cached tokens, one KV head: flops = 4 * 1 * 2 * 8 * 4 = 256;
    # bytes = (2*1*1*8 [K, V] + 2*1*2 [q, o]) * 4 * 2 = 160
    d = attention_decode_workload(1, 2, 8, 4, dtype_bytes=2, n_kv_heads=1)
    assert (d.flops, d.bytes) == (pytest.approx(256, rel=1e-12), pytest.approx(160, rel=1e-12))
