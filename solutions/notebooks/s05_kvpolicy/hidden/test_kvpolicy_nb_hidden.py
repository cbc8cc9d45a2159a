"""Edge cases: eviction order, rounding at block boundaries, refused inputs."""

import pytest
from kvpolicy import blocks_needed, kv_bytes_per_token, lru_hits, max_sequences


@pytest.mark.points(1)
def test_lru_is_not_fifo():
    # FIFO would evict 1 (oldest inserted) at 4 and miss the last 1; LRU evicts 2 (least recently used)
    assert lru_hits([1, 2, 3, 1, 4, 1], capacity=3) == 2
    assert lru_hits([5, 5, 5], capacity=1) == 2
    assert lru_hits([], capacity=4) == 0


@pytest.mark.points(1)
def test_max_sequences_rounds_each_sequence_up_to_whole_blocks():
    # 17 tokens hold 2 blocks of 16: 32 tokens * 10 bytes = 320 bytes each; 1000 // 320 = 3
    assert max_sequences(1000, 10, 17, 16) == 3
    assert max_sequences(319, 10, 17, 16) == 0


@pytest.mark.points(1)
def test_impossible_inputs_are_refused():
    with pytest.raises(ValueError):
        kv_bytes_per_token(0, 8, 128, 2)
    with pytest.raises(ValueError):
        blocks_needed(10, 0)
    with pytest.raises(ValueError):
        lru_hits([1], capacity=0)
