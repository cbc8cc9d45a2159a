"""Moving KV between paged pools: slots by hand, and gathers and scatters against a per-token loop
written here (the judge's), across block sizes and both block layouts. Copies are exact (atol 0)."""

from __future__ import annotations

import pytest
import torch
from disagg import gather_kv, kv_bytes, scatter_kv, token_slots

L, H, D = 3, 2, 4  # layers, KV heads, head_dim of the toy pools


def pool(num_blocks: int, block_size: int, layout: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    shape = (L, 2, num_blocks, block_size, H, D) if layout == "NHD" else (L, 2, num_blocks, H, block_size, D)
    return torch.randn(shape, generator=g)


def token_kv(cache: torch.Tensor, table: list[int], pos: int, layout: str) -> torch.Tensor:
    """(L, 2, H, D): the K and V of token position pos, read slot by slot (the oracle)."""
    bs = cache.shape[3] if layout == "NHD" else cache.shape[4]
    block, off = table[pos // bs], pos % bs
    return cache[:, :, block, off] if layout == "NHD" else cache[:, :, block, :, off]


@pytest.mark.points(1)
def test_token_slots_walk_the_block_table():
    # table [7, 2, 5], block size 4: positions 3..9 -> block 7 offset 3 = 31; block 2 offsets 0-3 = 8..11;
    # block 5 offsets 0-1 = 20, 21
    assert token_slots([7, 2, 5], 3, 10, 4).tolist() == [31, 8, 9, 10, 11, 20, 21]
    assert token_slots([7, 2, 5], 4, 4, 4).tolist() == []
    with pytest.raises(ValueError):
        token_slots([7, 2, 5], 0, 13, 4)  # position 12 needs a fourth block


@pytest.mark.points(2)
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_gather_reads_each_token_from_its_block(layout):
    cache = pool(8, 4, layout, seed=1)
    table = [6, 1, 3, 0]  # out of order on purpose: a gather by physical order would read the wrong tokens
    got = gather_kv(cache, table, 2, 15, layout)
    want = torch.stack([token_kv(cache, table, p, layout) for p in range(2, 15)], dim=2)
    assert got.shape == (L, 2, 13, H, D), f"{layout}: gather of positions 2..14 has shape {tuple(got.shape)}"
    torch.testing.assert_close(got, want, rtol=0, atol=0, msg=lambda m: f"{layout}, positions 2..14: {m}")


@pytest.mark.points(3)
@pytest.mark.parametrize("dst_layout", ["NHD", "HND"])
def test_kv_moves_between_block_sizes_bit_for_bit(dst_layout):
    """Block size 16 on one side, 4 on the other; 21 tokens: the last block of each side is partial."""
    src = pool(4, 16, "NHD", seed=2)
    src_table = [2, 0]
    dst = pool(12, 4, dst_layout, seed=3)
    before = dst.clone()
    dst_table = [9, 4, 11, 0, 7, 2]
    kv = gather_kv(src, src_table, 0, 21, "NHD")
    scatter_kv(dst, dst_table, 0, kv, dst_layout)
    for p in range(21):
        torch.testing.assert_close(token_kv(dst, dst_table, p, dst_layout), token_kv(src, src_table, p, "NHD"),
                                   rtol=0, atol=0, msg=lambda m, p=p: f"position {p} after the move (16 -> 4, {dst_layout}): {m}")
    written = {dst_table[p // 4] * 4 + p % 4 for p in range(21)}
    for slot in set(range(12 * 4)) - written:
        b, o = divmod(slot, 4)
        here = dst[:, :, b, o] if dst_layout == "NHD" else dst[:, :, b, :, o]
        was = before[:, :, b, o] if dst_layout == "NHD" else before[:, :, b, :, o]
        assert torch.equal(here, was), f"slot {slot} (block {b}, offset {o}) holds no moved token but was overwritten"


@pytest.mark.points(1)
def test_scatter_refuses_kv_that_does_not_fit_the_pool():
    dst = pool(4, 4, "NHD", seed=4)
    with pytest.raises(ValueError):
        scatter_kv(dst, [0, 1], 0, torch.zeros(L, 2, 5, H + 1, D))  # wrong head count
    with pytest.raises(ValueError):
        scatter_kv(dst, [0, 1], 0, torch.zeros(L, 2, 5, H, D, dtype=torch.float64))  # wrong dtype
    scatter_kv(dst, [3, 1], 2, torch.ones(L, 2, 5, H, D))  # the valid case: positions 2..6
    assert torch.equal(dst[:, :, 3, 2:], torch.ones(L, 2, 2, H, D)) and torch.equal(dst[:, :, 1, :3], torch.ones(L, 2, 3, H, D)), \
        "positions 2..6 over table [3, 1] (block size 4) are block 3 offsets 2-3 and block 1 offsets 0-2"


@pytest.mark.points(1)
def test_kv_bytes_counts_k_and_v_of_every_layer():
    # the course model in fp32: 5 layers, 2 KV heads, head_dim 64 -> 2 * 5 * 2 * 64 * 4 = 5120 bytes a token
    assert kv_bytes(10, 5, 2, 64, torch.float32) == 51200
    assert kv_bytes(10, 5, 2, 64, torch.bfloat16) == 25600
