"""The analysis of README "Analysis": each number in answers/training_numbers.toml against the same
quantity recomputed here from the student's own bucket_assignment on GPT-2 small's parameters
(analysis.py's gpt2_small_numels, from the grader's own copy)."""

from __future__ import annotations

import pytest
from analysis import MIB, gpt2_small_numels
from trainfw import bucket_assignment

from autograder.testing import numeric_answer

RANKS = 8


def buckets_mib(cap_mib: int, bytes_per_element: int) -> list[float]:
    sizes = [n * bytes_per_element for n in gpt2_small_numels()]
    return [sum(sizes[i] for i in b) / MIB for b in bucket_assignment(sizes, cap_mib * MIB)]


QUANTITIES = {
    "first_bucket_mib_25": lambda: buckets_mib(25, 4)[0],
    "last_bucket_mib_25": lambda: buckets_mib(25, 4)[-1],
    "allreduce_gib_per_rank_8": lambda: 2 * (RANKS - 1) / RANKS * sum(buckets_mib(25, 4)) / 1024,
}
COUNTS = {
    "buckets_25mib": lambda: len(buckets_mib(25, 4)),
    "buckets_1mib": lambda: len(buckets_mib(1, 4)),
    "buckets_25mib_bf16": lambda: len(buckets_mib(25, 2)),
}


@pytest.mark.points(1)
@pytest.mark.parametrize("key", sorted(QUANTITIES))
def test_numeric_answer_matches_your_buckets(key, request, tol):
    got = numeric_answer(request.config.rootpath, "training_numbers", key)
    want = QUANTITIES[key]()
    assert got == pytest.approx(want, **{"rel": tol("numeric answer")["rtol"]}), f"{key}: you wrote {got}, your code gives {want:.4g}"


@pytest.mark.points(1)
@pytest.mark.parametrize("key", sorted(COUNTS))
def test_numeric_count_matches_your_buckets(key, request, tol):
    got = numeric_answer(request.config.rootpath, "training_numbers", key)
    want = COUNTS[key]()
    assert abs(got - want) <= tol("numeric answer, count")["atol"], f"{key}: you wrote {got}, your code gives {want}"
