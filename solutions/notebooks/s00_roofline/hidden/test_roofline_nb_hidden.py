"""Edge cases: non-square shapes, the ridge crossing, and inputs that must be refused."""

import pytest
from roofline import attainable_flops, gemm_bound, gemm_intensity, ridge_point

PEAK, H100_BW, H200_BW = 989e12, 3.35e12, 4.8e12


@pytest.mark.points(1)
def test_non_square_gemm_counts_each_operand_once():
    # A (64, 1024), B (1024, 256), C (64, 256) in fp32: 2*64*256*1024 FLOPs over 344064 elements
    assert gemm_intensity(64, 256, 1024, 4) == pytest.approx(2 * 64 * 256 * 1024 / ((65536 + 262144 + 16384) * 4),
                                                           rel=1e-12)


@pytest.mark.points(1)
def test_the_ridge_crossing_moves_to_smaller_batches_on_faster_memory():
    # n = k = 8192 bf16: the intensity passes 295.2 between m = 310 and 320, and 206.0 between 215 and 220
    assert gemm_bound(310, 8192, 8192, 2, PEAK, H100_BW) == "memory"
    assert gemm_bound(320, 8192, 8192, 2, PEAK, H100_BW) == "compute"
    assert gemm_bound(215, 8192, 8192, 2, PEAK, H200_BW) == "memory"
    assert gemm_bound(220, 8192, 8192, 2, PEAK, H200_BW) == "compute"


@pytest.mark.points(1)
def test_impossible_inputs_are_refused():
    with pytest.raises(ValueError):
        attainable_flops(PEAK, H100_BW, -1.0)
    with pytest.raises(ValueError):
        ridge_point(PEAK, 0.0)
    with pytest.raises(ValueError):
        gemm_intensity(0, 8, 8, 2)
