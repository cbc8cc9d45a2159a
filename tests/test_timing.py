import pytest

from autograder.timing import Timing, measure


def test_measure_honours_warmup_and_reps_on_cpu():
    calls = []
    timing = measure(lambda: calls.append(1), warmup=4, reps=7, device="cpu")
    assert len(calls) == 11 and timing.reps == 7
    assert timing.min_s <= timing.p10_s <= timing.median_s <= timing.p90_s


def test_timing_statistics_match_hand_computation():
    t = Timing.from_samples([3.0, 1.0, 2.0, 10.0])
    assert t.median_s == 2.5 and t.mean_s == 4.0 and t.min_s == 1.0
    assert t.stdev_s == pytest.approx(4.0824829, rel=1e-6)  # sample stdev of 1, 2, 3, 10


def test_measure_rejects_zero_reps():
    with pytest.raises(ValueError, match="reps"):
        measure(lambda: None, reps=0, device="cpu")
