"""GPU correctness beyond the public cases: ragged lengths and grouped-query heads at scale."""

import pytest
import torch

pytestmark = pytest.mark.gpu

CAUSAL = pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])


@pytest.mark.points(2)
@CAUSAL
@pytest.mark.parametrize("seq_len", [1, 63, 1000, 1025])
def test_ragged_lengths_gpu(seq_len, causal, qkv_factory, attention_check):
    q, k, v, do = qkv_factory(2, 8, 8, seq_len, 128, torch.bfloat16, "cuda", seed=seq_len)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)


@pytest.mark.points(2)
@CAUSAL
@pytest.mark.parametrize(("heads", "kv_heads", "head_dim"), [(32, 8, 128), (16, 1, 64)],
                         ids=["gqa4-d128", "mqa-d64"])
def test_grouped_query_heads_gpu(heads, kv_heads, head_dim, causal, qkv_factory,
                                 attention_check):
    # fp16: dK, dV sum up to 16 heads x 1024 queries of terms rounded to the input dtype; in
    # bf16 (8 bits of mantissa) a few cancelling sums land just outside 1e-2, in fp16 they don't.
    q, k, v, do = qkv_factory(2, heads, kv_heads, 1024, head_dim, torch.float16, "cuda", seed=7)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)


@pytest.mark.points(2)
@CAUSAL
@pytest.mark.parametrize(("n_q", "n_k"), [(512, 2048), (2048, 511)], ids=["512x2048", "2048x511"])
def test_unequal_lengths_gpu(n_q, n_k, causal, tol, unequal_check):
    # d = 128, 16 query heads over 4 KV heads: the ragged kernels at the fast path's tiles. fp16
    # for the reason test_grouped_query_heads_gpu gives.
    g = torch.Generator(device="cuda").manual_seed(n_q + n_k)
    q, k, v, do = (torch.randn(2, h, n, 128, generator=g, device="cuda", dtype=torch.float16)
                   for h, n in ((16, n_q), (4, n_k), (4, n_k), (16, n_q)))
    unequal_check(q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), do, causal=causal,
                  **tol("attention, half"))


@pytest.mark.points(2)
@CAUSAL
def test_packed_batch_gpu(causal, tol, packed_factory, packed_check):
    # Mixed lengths, including 1, an empty sequence and lengths off every tile; d = 128, fp16 (as
    # above), sequences offset by 0.05 x their index (0.5 makes the scores too peaked for 1e-2).
    lens_q = [1, 1000, 0, 63, 2048, 300]
    lens_k = [1, 1000, 5, 63, 2048, 777]
    batch = packed_factory(lens_q, lens_k, 16, 4, 128, torch.float16, "cuda", seed=8, offset=0.05)
    packed_check(*batch, lens_q, lens_k, causal=causal, what="gpu fp16", **tol("attention, half"))
