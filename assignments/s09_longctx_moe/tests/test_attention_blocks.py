"""The pieces of ring attention in one process (fp32): the visibility mask from positions
(causal, sliding window) against the handout's rule; block_attention's output and log-sum-exp
against SDPA and torch.logsumexp over the same visible keys, with rows that see no key; merging
the blocks of a key split by log-sum-exp equals attention over all keys; shard positions of the
contiguous and zigzag layouts."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import mask_from_positions, sdpa_reference, zigzag_or_contiguous

from longmoe import block_attention, merge_attention, shard_positions, visible


def qkv(seed: int, t: int, scale: float = 1.0, heads: int = 2, dim: int = 8):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, heads, t, dim, generator=g) for _ in range(3))
    return q * scale, k, v


@pytest.mark.points(2)
@pytest.mark.parametrize("causal, window", [(False, None), (True, None), (True, 1), (True, 5)])
def test_visible_follows_positions(causal, window):
    q_pos, k_pos = torch.tensor([0, 3, 4, 11, 12, 15]), torch.tensor([12, 13, 2, 3, 4, 8, 9, 10])  # zigzag-like
    got, want = visible(q_pos, k_pos, causal, window), mask_from_positions(q_pos, k_pos, causal, window)
    bad = (got != want).nonzero().tolist()
    assert not bad, (f"causal={causal}, window={window}: wrong at (query position, key position) "
                     f"{[(int(q_pos[a]), int(k_pos[b])) for a, b in bad[:6]]}; a window w sees keys i - w < j <= i")


@pytest.mark.points(2)
@pytest.mark.parametrize("causal, window", [(False, None), (True, None), (True, 3)])
def test_block_attention_and_its_lse_match_sdpa(causal, window, tol):
    q, k, v = qkv(1, 12)
    q_pos, k_pos = torch.arange(4, 10), torch.arange(12)[[0, 1, 2, 3, 8, 9, 10, 11]]  # queries 6 and 7 see no key here with window 3
    q, k, v = q[:, :, :6], k[:, :, :8], v[:, :, :8]
    out, lse = block_attention(q, k, v, q_pos, k_pos, causal=causal, window=window)
    mask = mask_from_positions(q_pos, k_pos, causal, window)
    scores = (q @ k.transpose(-1, -2) / math.sqrt(8)).masked_fill(~mask, float("-inf"))
    want_lse = torch.logsumexp(scores, dim=-1)
    seen = mask.any(dim=-1)  # rows that see at least one key of this block
    want = torch.zeros_like(q)
    want[:, :, seen] = F.scaled_dot_product_attention(q[:, :, seen], k, v, attn_mask=mask[seen])
    torch.testing.assert_close(out, want, **tol("attention, fp32"), msg=lambda m: f"causal={causal}, window={window}: output: {m}")
    assert torch.isneginf(lse[:, :, ~seen]).all(), f"causal={causal}, window={window}: a row with no visible key needs lse = -inf"
    torch.testing.assert_close(lse[:, :, seen], want_lse[:, :, seen], **tol("attention, fp32"),
                               msg=lambda m: f"causal={causal}, window={window}: log-sum-exp: {m}")


@pytest.mark.points(3)
@pytest.mark.parametrize("causal, window, scale", [(False, None, 1.0), (True, None, 1.0), (True, 4, 1.0),
                                                    (True, None, 60.0)])
def test_merged_blocks_equal_attention_over_all_keys(causal, window, scale, tol):
    t = 12
    q, k, v = qkv(2, t, scale)
    pos = torch.arange(t)
    blocks = [torch.arange(8, 12), torch.arange(0, 4), torch.arange(4, 8)]  # the last block first: rows see none
    out = lse = None
    for b in blocks:
        part, part_lse = block_attention(q, k[:, :, b], v[:, :, b], pos, b, causal=causal, window=window)
        out, lse = (part, part_lse) if out is None else merge_attention(out, lse, part, part_lse)
    want = sdpa_reference(q, k, v, causal, window)
    name = "attention, fp32" if scale == 1 else "attention, fp32, scores in the hundreds"
    torch.testing.assert_close(out, want, **tol(name), msg=lambda m: (
        f"three key blocks merged (causal={causal}, window={window}, q scaled by {scale}): {m}"))


@pytest.mark.points(2)
@pytest.mark.parametrize("seq_len, world, layout", [(16, 4, "contiguous"), (16, 4, "zigzag"), (24, 3, "zigzag"),
                                                    (8, 1, "zigzag")])
def test_shard_positions_follow_the_layout(seq_len, world, layout):
    for rank in range(world):
        got, want = shard_positions(seq_len, rank, world, layout), zigzag_or_contiguous(seq_len, rank, world, layout)
        assert got.tolist() == want.tolist(), f"{layout}, {seq_len} tokens over {world} ranks, rank {rank}: {got.tolist()}, want {want.tolist()}"


def test_shard_positions_refuse_a_length_that_does_not_split():
    assert len(shard_positions(12, 0, 3, "zigzag")) == 4  # the valid case
    with pytest.raises(ValueError, match="multiple"):
        shard_positions(12, 0, 4, "zigzag")
