"""Ring attention on three gloo ranks (an odd ring) with batch 2, 3 heads of 16 dims, 36 tokens:
zigzag without a mask, contiguous and zigzag sliding windows (7 keys; 1 key: only the query
itself), and a causal zigzag ring whose q is scaled by 80 so that scores reach the hundreds: a
merge or a block that does not subtract its maximum overflows there."""

from __future__ import annotations

import pytest
from checks import check_ring, draw_ring_inputs
from rank_programs import ring_on_rank

CASES = [("zigzag", False, None, 1.0), ("contiguous", True, 7, 1.0), ("zigzag", True, 1, 1.0),
         ("zigzag", True, None, 80.0), ("contiguous", True, None, 80.0)]


@pytest.mark.points(8)
@pytest.mark.world_size(3)
def test_ring_attention_odd_ring_windows_and_large_scores(ranks, tol):
    whole, shards = draw_ring_inputs(CASES, 3, (2, 3, 36, 16))
    results = ranks.run_each(ring_on_rank, shards, CASES)
    check_ring(results, whole, CASES, tol)
