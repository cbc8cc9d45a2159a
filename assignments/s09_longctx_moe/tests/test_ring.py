"""Ring attention on four gloo ranks against SDPA over the whole sequence (fp32, 32 tokens,
2 heads of 8 dims): each rank gets only its own shards of q, k and v, drawn in the judge from a
secret seed, and must return its rows of the whole sequence's attention. Four cases in one start
of the ranks: contiguous and zigzag shards under a causal mask, contiguous without a mask, and a
zigzag causal sliding window of 6 keys (wider than one zigzag chunk of 4, so it reaches across ring
steps)."""

from __future__ import annotations

import pytest
from checks import check_ring, draw_ring_inputs
from rank_programs import ring_on_rank

CASES = [("contiguous", True, None, 1.0), ("zigzag", True, None, 1.0),
         ("contiguous", False, None, 1.0), ("zigzag", True, 6, 1.0)]


@pytest.mark.points(12)
@pytest.mark.world_size(4)
def test_ring_attention_equals_whole_sequence_attention(ranks, tol):
    whole, shards = draw_ring_inputs(CASES, 4, (1, 2, 32, 8))
    results = ranks.run_each(ring_on_rank, shards, CASES)
    check_ring(results, whole, CASES, tol)
