"""The notebook's KV-cache sizing and eviction functions against hand arithmetic."""

import pytest
from kvpolicy import blocks_needed, kv_bytes_per_token, lru_hits, max_sequences

LLAMA3_8B = (32, 8, 128, 2)  # layers, KV heads, head dim, bf16 bytes
GIB = 2**30


@pytest.mark.points(1)
def test_kv_bytes_per_token_counts_k_and_v_per_layer_and_kv_head():
    assert kv_bytes_per_token(*LLAMA3_8B) == 131072  # 2 * 32 * 8 * 128 * 2 = 128 KiB


@pytest.mark.points(1)
def test_a_partly_filled_block_counts_whole():
    assert [blocks_needed(n, 16) for n in (0, 1, 16, 17, 1000)] == [0, 1, 1, 2, 63]


@pytest.mark.points(2)
def test_sequences_that_fit_in_40_gib():
    per_token = kv_bytes_per_token(*LLAMA3_8B)
    assert max_sequences(40 * GIB, per_token, 8192, 16) == 40  # 1 GiB per 8192-token sequence
    assert max_sequences(40 * GIB, per_token, 1000, 16) == 325  # 63 blocks = 1008 tokens each


@pytest.mark.points(2)
def test_lru_keeps_the_recently_used_block():
    # capacity 3: 1 2 3 miss; 1 hit; 4 evicts 2; 1 hit; 2 miss (evicts 3)
    assert lru_hits([1, 2, 3, 1, 4, 1, 2], capacity=3) == 2
