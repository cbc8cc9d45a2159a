"""CUDA graphs on the CPU: choosing the captured size a batch is padded to."""

from __future__ import annotations

import pytest
from conftest import in_worker


@in_worker
def buckets(batches: list, sizes: list) -> list:
    from traceprof import bucket_size

    out = []
    for b in batches:
        try:
            out.append(bucket_size(b, sizes))
        except ValueError:
            out.append("ValueError")
    return out


@pytest.mark.points(2)
def test_a_batch_pads_to_the_smallest_captured_size_that_holds_it():
    assert buckets([1, 2, 3, 5, 8, 9, 16], [1, 2, 4, 8, 16]) == [1, 2, 4, 8, 8, 16, 16]
    assert buckets([3], [16, 4, 8]) == [4]  # sizes in any order


@pytest.mark.points(1)
def test_a_batch_no_graph_holds_is_refused():
    assert buckets([17, 0], [1, 2, 4, 8, 16]) == ["ValueError", "ValueError"]
