"""Query and key lengths that differ, and packed variable-length batches (small shapes, fp32).

Oracle: torch SDPA with an explicit bottom-right causal mask (query i sees keys j <= i + N_k -
N_q), sequence by sequence, in float64 on the CPU (conftest.py). A query that sees no key has
o = 0, lse = +inf and zero gradients. Tolerances: assignment.toml's [tolerances].
"""

import pytest
import torch

from flashattn import flash_attn_forward

CAUSAL = pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])


@pytest.mark.points(2)
@CAUSAL
@pytest.mark.parametrize(("n_q", "n_k"), [(24, 40), (40, 24)], ids=["fewer-queries", "more-queries"])
def test_unequal_lengths_match_sdpa_bottom_right(n_q, n_k, causal, device, tol, unequal_check):
    g = torch.Generator(device=device).manual_seed(n_q * 100 + n_k)
    q, k, v, do = (torch.randn(1, 2, n, 32, generator=g, device=device) for n in (n_q, n_k, n_k, n_q))
    unequal_check(q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), do, causal=causal,
                  **tol("attention, fp32"))


@pytest.mark.points(1)
def test_one_causal_query_sees_every_key(device, tol):
    # A decode step: one new query over 37 cached keys. Bottom-right, it is the last row and sees
    # all of them (top-left alignment would give it key 0 only).
    g = torch.Generator(device=device).manual_seed(5)
    q, k, v = torch.randn(1, 2, 1, 32, generator=g, device=device), *(
        torch.randn(1, 2, 37, 32, generator=g, device=device) for _ in range(2))
    causal, _ = flash_attn_forward(q, k, v, causal=True)
    full, _ = flash_attn_forward(q, k, v, causal=False)
    torch.testing.assert_close(causal, full, **tol("attention, fp32"),
                               msg=lambda m: f"one causal query over 37 keys must see all 37: {m}")


@pytest.mark.points(1)
def test_worked_example_rows_without_keys(device, tol):
    # The handout's example: N_q = 4, N_k = 2, causal. Query i sees keys j <= i - 2: rows 0 and 1
    # see none (o = 0, lse = +inf), row 2 sees key 0 only (o = v_0), row 3 both keys.
    g = torch.Generator(device=device).manual_seed(6)
    q, k, v = (torch.randn(1, 1, n, 16, generator=g, device=device) for n in (4, 2, 2))
    o, lse = flash_attn_forward(q, k, v, causal=True)
    assert torch.equal(o[0, 0, :2], torch.zeros_like(o[0, 0, :2])), f"rows 0, 1 must be 0: {o[0, 0, :2]}"
    assert torch.isinf(lse[0, 0, :2]).all() and (lse[0, 0, :2] > 0).all(), \
        f"rows without keys must have lse = +inf, got {lse[0, 0, :2].tolist()}"
    torch.testing.assert_close(o[0, 0, 2], v[0, 0, 0], **tol("attention, fp32"),
                               msg=lambda m: f"row 2 sees key 0 only, so o_2 = v_0: {m}")


@pytest.mark.points(3)
@CAUSAL
def test_packed_batch_matches_sdpa_per_sequence(causal, device, tol, packed_factory, packed_check):
    # Three sequences of 5, 40 and 17 tokens packed back to back (no padding), 4 query heads over
    # 2 KV heads: forward, lse (H, total_q) and dq, dk, dv through flash_attention_varlen.
    lens = [5, 40, 17]
    batch = packed_factory(lens, lens, 4, 2, 32, torch.float32, device, seed=7)
    packed_check(*batch, lens, lens, causal=causal, **tol("attention, fp32"))
