"""Hidden: attention workloads, GQA, causal masking, the ridge edge, zero-FLOP copies."""

import pytest
from hwnumerics import (
    H100_SXM,
    H200,
    Workload,
    analyze,
    attainable_flops,
    attention_decode_workload,
    attention_prefill_workload,
    gemm_workload,
    gemv_workload,
)


@pytest.mark.points(2)
def test_prefill_attention_intensity_is_seq_len_over_dtype_bytes():
    w = attention_prefill_workload(4, 32, 4096, 128, dtype_bytes=2)
    # flops = 4 * 4 * 32 * 4096**2 * 128 = 1_099_511_627_776
    assert w.flops == pytest.approx(4 * 4 * 32 * 4096**2 * 128, rel=1e-12)
    # bytes = Q, K, V read + O written = 4 * 4 * 32 * 4096 * 128 * 2 = 536_870_912
    assert w.bytes == pytest.approx(536_870_912, rel=1e-12)
    assert w.intensity == pytest.approx(4096 / 2, rel=1e-12)  # 2048 FLOP/byte
    assert analyze(w, H100_SXM, "fp16").bound == "compute"


@pytest.mark.points(1)
def test_causal_prefill_counts_half_the_flops_and_the_same_bytes():
    full = attention_prefill_workload(4, 32, 4096, 128, dtype_bytes=2)
    causal = attention_prefill_workload(4, 32, 4096, 128, dtype_bytes=2, causal=True)
    assert causal.flops == pytest.approx(549_755_813_888, rel=1e-12)  # 1_099_511_627_776 / 2
    assert causal.bytes == pytest.approx(full.bytes, rel=1e-12)


@pytest.mark.points(1)
def test_gqa_prefill_reads_fewer_kv_bytes():
    w = attention_prefill_workload(4, 32, 4096, 128, dtype_bytes=2, n_kv_heads=8)
    # (2 * 4 * 32 [Q, O] + 2 * 4 * 8 [K, V]) * 4096 * 128 * 2 = 320 * 1_048_576 = 335_544_320
    assert w.bytes == pytest.approx(335_544_320, rel=1e-12)
    assert w.flops == pytest.approx(4 * 4 * 32 * 4096**2 * 128, rel=1e-12)  # heads of Q set the work


@pytest.mark.points(2)
def test_decode_attention_is_memory_bound_with_intensity_near_the_gqa_group():
    w = attention_decode_workload(8, 32, 4096, 128, dtype_bytes=2, n_kv_heads=8)
    assert w.flops == pytest.approx(4 * 8 * 32 * 4096 * 128, rel=1e-12)  # 536_870_912
    # (2 * 8 * 8 * 4096 [K, V] + 2 * 8 * 32 [q, o]) * 128 * 2 = 134_348_800
    assert w.bytes == pytest.approx(134_348_800, rel=1e-12)
    assert w.intensity == pytest.approx(536_870_912 / 134_348_800, rel=1e-12)  # ~4 = 32 / 8
    p = analyze(w, H200, "bf16")
    assert p.bound == "memory"
    assert p.min_time_s == pytest.approx(134_348_800 / 4.8e12, rel=1e-9)  # 28 us


@pytest.mark.points(1)
def test_batched_gemv_is_a_gemm_with_m_equal_to_batch():
    w = gemv_workload(8192, 8192, dtype_bytes=2, batch=16)
    assert w.flops == pytest.approx(2 * 16 * 8192 * 8192, rel=1e-12)
    # (16 * 8192 [x] + 8192 * 8192 [W] + 16 * 8192 [y]) * 2 = 134_742_016
    assert w.bytes == pytest.approx(134_742_016, rel=1e-12)


@pytest.mark.points(1)
def test_gemm_workload_of_a_rectangular_fp8_gemm():
    w = gemm_workload(128, 4096, 14336, dtype_bytes=1)
    assert w.flops == pytest.approx(2 * 128 * 4096 * 14336, rel=1e-12)
    assert w.bytes == pytest.approx(128 * 14336 + 14336 * 4096 + 128 * 4096, rel=1e-12)


@pytest.mark.points(1)
def test_a_workload_exactly_at_the_ridge_is_compute_bound():
    w = Workload(flops=989e12, bytes=3.35e12)  # intensity = 989e12 / 3.35e12 = the H100 ridge
    p = analyze(w, H100_SXM, "bf16")
    assert p.bound == "compute"
    assert p.min_time_s == pytest.approx(1.0, rel=1e-12)  # both roofs give 1 s


@pytest.mark.points(1)
def test_a_zero_flop_copy_is_memory_bound_and_timed_by_its_bytes():
    # A pure copy of 1 GiB: read once + written once, no arithmetic. Intensity 0 sits below every
    # ridge point, and the only roof that can bound its time is the memory roof.
    copy = Workload(flops=0.0, bytes=2 * 2**30)
    for device, dtype in ((H200, "bf16"), (H100_SXM, "fp8")):
        p = analyze(copy, device, dtype)
        assert p.intensity == 0.0
        assert p.attainable_flops == 0.0
        assert p.bound == "memory"
        assert p.min_time_s == pytest.approx(2 * 2**30 / device.mem_bw, rel=1e-12)  # H200: 447 us


@pytest.mark.points(1)
def test_attainable_flops_rejects_negative_intensity():
    assert attainable_flops(H200, "bf16", 0.0) == 0.0
    with pytest.raises(ValueError):
        attainable_flops(H200, "bf16", -1.0)
