"""Edge cases of unequal lengths and packed batches: more queries than keys and fewer, length-1
and empty sequences, lengths off the tile grid, grouped heads, half precision, a custom scale, a
loose max_seqlen, and input validation. Every case checks o, lse, dq, dk, dv against SDPA with an
explicit bottom-right mask, sequence by sequence (float64 on the CPU; conftest.py), at the
tolerances of assignment.toml. Packed sequences are offset by their index, so reading a
neighbour's rows changes the numbers.
"""

import pytest
import torch

from flashattn import flash_attention_varlen, flash_attn_forward, flash_attn_varlen_forward

CAUSAL = pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])


def _unequal(batch, heads, kv_heads, n_q, n_k, head_dim, device, seed):
    g = torch.Generator(device=device).manual_seed(seed)

    def rnd(h, n):
        return torch.randn(batch, h, n, head_dim, generator=g, device=device)

    q, k, v = rnd(heads, n_q), rnd(kv_heads, n_k), rnd(kv_heads, n_k)
    return q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), rnd(heads, n_q)


@pytest.mark.points(2)
@CAUSAL
@pytest.mark.parametrize(("n_q", "n_k"), [(1, 33), (33, 1), (17, 45), (45, 17)],
                         ids=["1x33", "33x1", "17x45", "45x17"])
def test_unequal_lengths_off_the_tile_grid(n_q, n_k, causal, device, tol, unequal_check):
    # Batch 2, 4 query heads over 2 KV heads; lengths that are not multiples of any tile.
    q, k, v, do = _unequal(2, 4, 2, n_q, n_k, 16, device, seed=n_q * 64 + n_k)
    unequal_check(q, k, v, do, causal=causal, **tol("attention, fp32"))


@pytest.mark.points(2)
def test_rows_without_keys_are_zero_with_zero_gradients(device, attention_grads):
    # N_q = 40 > N_k = 9, causal: queries 0..30 see no key. FlashAttention's convention: o = 0,
    # lse = +inf, dq = 0, and they add nothing to dk, dv (which must stay finite).
    q, k, v, do = _unequal(1, 2, 1, 40, 9, 16, device, seed=11)
    o, lse = flash_attn_forward(q.detach(), k.detach(), v.detach(), causal=True)
    assert torch.equal(o[:, :, :31], torch.zeros_like(o[:, :, :31])), "rows 0..30 see no key: o must be 0"
    assert (lse[:, :, :31] == float("inf")).all(), f"rows 0..30: lse must be +inf, got {lse[0, 0, :31].tolist()}"
    assert torch.isfinite(lse[:, :, 31:]).all(), "rows 31..39 see keys: lse must be finite"
    _, dq, dk, dv = attention_grads(q, k, v, do, causal=True)
    assert torch.equal(dq[:, :, :31], torch.zeros_like(dq[:, :, :31])), "rows without keys: dq must be 0"
    assert torch.isfinite(dk).all() and torch.isfinite(dv).all(), "dk, dv must be finite"


PACKED = {  # name: (lens_q, lens_k)
    "length-1": ([1, 1, 1], [1, 20, 3]),
    "off-the-grid": ([33, 16, 17, 48], [33, 16, 17, 48]),
    "more-queries": ([3, 20, 33], [30, 7, 33]),
    "empty-sequences": ([0, 9, 1, 0], [4, 0, 18, 0]),
}


@pytest.mark.points(2)
@CAUSAL
@pytest.mark.parametrize("case", list(PACKED))
def test_packed_edge_cases(case, causal, device, tol, packed_factory, packed_check):
    lens_q, lens_k = PACKED[case]
    batch = packed_factory(lens_q, lens_k, 2, 2, 16, torch.float32, device, seed=len(case))
    packed_check(*batch, lens_q, lens_k, causal=causal, what=case, **tol("attention, fp32"))


@pytest.mark.points(2)
@CAUSAL
def test_packed_multi_query_heads(causal, device, tol, packed_factory, packed_check):
    # 4 query heads over one KV head: dk, dv of each sequence sum its 4 heads' queries only.
    lens = [20, 37, 9]
    batch = packed_factory(lens, lens, 4, 1, 32, torch.float32, device, seed=21)
    packed_check(*batch, lens, lens, causal=causal, what="mqa", **tol("attention, fp32"))


@pytest.mark.points(1)
def test_packed_half_precision(device, tol, packed_factory, packed_check):
    lens_q, lens_k = [29, 6], [13, 40]
    batch = packed_factory(lens_q, lens_k, 2, 1, 64, torch.float16, device, seed=22)
    packed_check(*batch, lens_q, lens_k, causal=True, what="fp16", **tol("attention, half"))


@pytest.mark.points(1)
def test_packed_custom_scale_and_loose_max_seqlen(device, tol, packed_factory, packed_reference):
    # max_seqlen only bounds the lengths: a larger one must give the same answer. sm_scale = 0.37.
    lens = [12, 30]
    q, k, v, do, cu_q, cu_k = packed_factory(lens, lens, 2, 2, 32, torch.float32, device, seed=23)
    o, lse = flash_attn_varlen_forward(q.detach(), k.detach(), v.detach(), cu_q, cu_k, 90, 70,
                                       causal=True, sm_scale=0.37)
    ref_o, ref_lse, *_ = packed_reference(q, k, v, do, lens, lens, True, 0.37)
    for name, got, want in (("O", o, ref_o), ("LSE", lse, ref_lse)):
        torch.testing.assert_close(got.to(want.dtype), want, **tol("attention, fp32"),
                                   msg=lambda m, name=name: f"{name}, max_seqlen 90/70 for lengths {lens}: {m}")


@pytest.mark.points(1)
def test_packed_input_validation(device, packed_factory):
    # The valid call works; int64 cu_seqlens, and cu_seqlens_q and _k of different batch sizes,
    # are ValueErrors (flash_attn_varlen_func takes int32).
    lens = [3, 5]
    q, k, v, _, cu_q, cu_k = (t.detach() for t in packed_factory(lens, lens, 2, 2, 16,
                                                                   torch.float32, device, seed=24))
    assert flash_attention_varlen(q, k, v, cu_q, cu_k, 5, 5).shape == q.shape
    with pytest.raises(ValueError):
        flash_attention_varlen(q, k, v, cu_q.long(), cu_k.long(), 5, 5)
    with pytest.raises(ValueError):
        flash_attention_varlen(q, k, v, cu_q, cu_k[:2], 5, 5)
