"""The notebook's roofline functions against hand arithmetic on H100 / H200 datasheet numbers."""

import pytest
from roofline import attainable_flops, gemm_bound, gemm_intensity, ridge_point

PEAK, H100_BW, H200_BW = 989e12, 3.35e12, 4.8e12  # bf16 dense FLOP/s; HBM bytes/s


@pytest.mark.points(1)
def test_ridge_point_is_peak_over_bandwidth():
    assert ridge_point(PEAK, H100_BW) == pytest.approx(295.22, abs=0.01)  # 989e12 / 3.35e12
    assert ridge_point(PEAK, H200_BW) == pytest.approx(206.04, abs=0.01)  # faster memory, lower ridge


@pytest.mark.points(2)
def test_attainable_flops_follows_the_lower_roof():
    assert attainable_flops(PEAK, H100_BW, 100.0) == pytest.approx(3.35e14, rel=1e-12)  # memory roof
    assert attainable_flops(PEAK, H100_BW, 1000.0) == pytest.approx(PEAK, rel=1e-12)  # compute roof


@pytest.mark.points(2)
def test_gemm_intensity_counts_two_flops_per_multiply_add():
    assert gemm_intensity(4096, 4096, 4096, 2) == pytest.approx(2 * 4096 / 6, rel=1e-12)  # 1365.33
    # decode: one row against an 8192^2 weight, ~1 FLOP/byte
    assert gemm_intensity(1, 8192, 8192, 2) == pytest.approx(2 * 8192**2 / ((2 * 8192 + 8192**2) * 2), rel=1e-12)


@pytest.mark.points(1)
def test_big_gemm_is_compute_bound_and_decode_is_memory_bound():
    assert gemm_bound(4096, 4096, 4096, 2, PEAK, H100_BW) == "compute"
    assert gemm_bound(1, 8192, 8192, 2, PEAK, H100_BW) == "memory"
