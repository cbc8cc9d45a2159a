"""The W4A16 GEMM against A.float() @ W^T with W dequantized by the test's own v1 oracle.

Error measure: rel = mean|C - C_ref| / mean|C_ref| (fp32 C_ref). fp16: rel < 1e-3. bf16: rel <
floor + 1e-3, floor the error of an ideal bf16 GEMM (W rounded to bf16, exact sums, output rounded)."""

import pytest
import torch
from gptq import w4a16_matmul

KEYS = ("qweight", "qzeros", "scales", "g_idx")


def rel(c: torch.Tensor, ref: torch.Tensor) -> float:
    return float((c.float().cpu() - ref).abs().mean() / ref.abs().mean())


def check(c, a, w, tol):
    """Assert the kernel's c is within the handout's bound of A.float() @ W^T (W fp32 (N, K))."""
    a, ref = a.float().cpu(), a.float().cpu() @ w.T
    assert c.shape == ref.shape
    bound = tol("w4a16, fp16")["rtol"]
    if c.dtype == torch.bfloat16:
        floor = rel((a @ w.bfloat16().float().T).bfloat16(), ref)
        bound = floor + tol("w4a16, bf16")["rtol"]
    assert rel(c, ref) < bound, f"rel error {rel(c, ref):.3e} >= {bound:.3e}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("m,act", [(1, False), (3, True), (16, False)], ids=["m1-seq", "m3-act", "m16-seq"])
def test_matches_the_dequantized_reference(oracles, tol, device, m, act, dtype):
    k, n, group = 320, 72, 64  # K not a multiple of BLOCK_K = 128, N not of BLOCK_N = 64
    t, w = oracles.random_v1(k, n, group, act, seed=m)
    a = torch.randn(m, k, generator=torch.Generator().manual_seed(m)).to(dtype)
    c = w4a16_matmul(a.to(device), *(t[key].to(device) for key in KEYS), group_size=0 if act else group)
    assert c.dtype == dtype
    check(c, a, w, tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("m", [24, 130], ids=["m24", "m130"])
def test_prefill_sizes_match_the_dequantized_reference(oracles, tol, device, m, dtype):
    k, n, group = 384, 72, 128  # sequential groups of 128: M > 16 takes the transposed kernel
    t, w = oracles.random_v1(k, n, group, False, seed=m)
    a = torch.randn(m, k, generator=torch.Generator().manual_seed(m)).to(dtype)
    c = w4a16_matmul(a.to(device), *(t[key].to(device) for key in KEYS), group_size=group)
    assert c.dtype == dtype
    check(c, a, w, tol)


def test_split_k_1_and_4_agree(oracles, tol, device):
    t, w = oracles.random_v1(512, 64, 128, False, seed=5)
    a = torch.randn(3, 512, generator=torch.Generator().manual_seed(6)).half()
    args = [a.to(device)] + [t[key].to(device) for key in KEYS]
    c1, c4 = w4a16_matmul(*args, group_size=128, split_k=1), w4a16_matmul(*args, group_size=128, split_k=4)
    check(c1, a, w, tol)
    check(c4, a, w, tol)
    assert rel(c4, c1.float().cpu()) < tol("split-k agreement")["rtol"]


def test_two_runs_are_bitwise_equal(oracles, device):
    t, _ = oracles.random_v1(256, 64, 32, True, seed=7)
    a = torch.randn(5, 256, generator=torch.Generator().manual_seed(8)).half().to(device)
    args = [a] + [t[key].to(device) for key in KEYS]
    c1, c2 = w4a16_matmul(*args, split_k=2), w4a16_matmul(*args, split_k=2)
    assert torch.equal(c1.view(torch.int16), c2.view(torch.int16))


@pytest.mark.kernels()
def test_a_packed_weight_with_the_wrong_rows_raises_value_error(oracles, device):
    t, _ = oracles.random_v1(256, 64, 32, False, seed=9)
    a = torch.randn(2, 248).half().to(device)  # K = 248 but qweight has 256 / 8 rows
    with pytest.raises(ValueError, match="qweight"):
        w4a16_matmul(a, *(t[key].to(device) for key in KEYS))
    right = torch.randn(2, 256).half().to(device)  # the same weight with K = 256 works
    assert w4a16_matmul(right, *(t[key].to(device) for key in KEYS)).shape == (2, 64)
