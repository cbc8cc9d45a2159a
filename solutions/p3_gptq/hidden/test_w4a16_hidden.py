"""The W4A16 GEMM: more shapes, tile configurations, strided activations, split-K corner cases."""

import pytest
import torch
from gptq import choose_split_k, w4a16_matmul

from autograder.testing import in_worker

KEYS = ("qweight", "qzeros", "scales", "g_idx")


def rel(c, ref):
    return float((c.float().cpu() - ref).abs().mean() / ref.abs().mean())


def check(c, a, w, tol):
    a, ref = a.float().cpu(), a.float().cpu() @ w.T
    assert c.shape == ref.shape
    bound = tol("w4a16, fp16")["rtol"]
    if c.dtype == torch.bfloat16:
        bound += rel((a @ w.bfloat16().float().T).bfloat16(), ref)
    assert rel(c, ref) < bound, f"rel error {rel(c, ref):.3e} >= {bound:.3e}"


def run(oracles, device, m, k, n, group, act, dtype, seed=0, **opts):
    t, w = oracles.random_v1(k, n, group, act, seed)
    a = torch.randn(m, k, generator=torch.Generator().manual_seed(seed + 1)).to(dtype)
    c = w4a16_matmul(a.to(device), *(t[key].to(device) for key in KEYS), **opts)
    return c, a, w


@pytest.mark.points(2)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("opts", [
    {"group_size": 64, "block_k": 64, "split_k": 1},  # one group per K tile: scales after the dot
    {"group_size": 64, "block_k": 32, "split_k": 3},  # uneven splits, the sequential path
    {"group_size": 0, "block_m": 32, "block_n": 32, "block_k": 16, "split_k": 2},  # act-order path, small tiles
], ids=["bk64", "bk32-s3", "small-tiles"])
def test_tile_configurations(oracles, tol, device, opts, dtype):
    check(*run(oracles, device, 5, 328, 72, 64, opts["group_size"] == 0, dtype, seed=20, **opts), tol)


def test_empty_splits_contribute_zeros(oracles, tol, device):
    check(*run(oracles, device, 3, 256, 64, 32, True, torch.float16, seed=21, split_k=8), tol)


@pytest.mark.points(2)
def test_split_k_partial_sums_all_count(oracles, tol, device):
    """split_k = 4 with exactly 4 K tiles: each split one tile, a dropped one shows at once."""
    c, a, w = run(oracles, device, 2, 512, 64, 128, False, torch.float16, seed=22, group_size=128, split_k=4)
    check(c, a, w, tol)


@in_worker
def matmul_of_a_view(base, layout, tensors, **opts):
    """In the worker (a tensor crosses as a contiguous copy): `a` as a view of `base`, then the GEMM.
    column-major: base (K, M) transposed, stride (1, M); every-other-column: base (M, 2K)[:, ::2],
    stride (2K, 2)."""
    a = base.t() if layout == "column-major" else base[:, ::2]
    return w4a16_matmul(a, *tensors, **opts)


def _view_base(a, layout):
    """The contiguous base the worker cuts `a` from (the skipped columns hold NaN)."""
    if layout == "column-major":
        return a.T.contiguous()
    return torch.stack([a, torch.full_like(a, float("nan"))], dim=-1).flatten(-2)


@pytest.mark.parametrize("layout", ["column-major", "every-other-column"])
def test_strided_activations(oracles, tol, device, layout):
    t, w = oracles.random_v1(256, 64, 32, False, seed=23)
    a = torch.randn(6, 256, generator=torch.Generator().manual_seed(24)).half().to(device)
    tensors = [t[key].to(device) for key in KEYS]
    check(matmul_of_a_view(_view_base(a, layout), layout, tensors), a, w, tol)
    check(matmul_of_a_view(_view_base(a, layout), layout, tensors, group_size=32), a, w, tol)  # sequential groups


@pytest.mark.kernels()  # M = 0 launches nothing
def test_zero_rows(oracles, device):
    t, _ = oracles.random_v1(256, 64, 32, False, seed=25)
    c = w4a16_matmul(torch.empty(0, 256, dtype=torch.float16, device=device), *(t[key].to(device) for key in KEYS))
    assert tuple(c.shape) == (0, 64)


@pytest.mark.kernels()
def test_choose_split_k_fills_one_round_of_resident_programs():
    assert choose_split_k(1, 4096, 4096, 16, 64, 128, 132) == 4  # 64 tiles, 264 resident: 264 // 64
    assert choose_split_k(16, 4096, 4096, 16, 64, 128, 132, 3) == 6  # 396 resident
    assert choose_split_k(128, 6144, 4096, 128, 64, 128, 132) == 2  # 96 tiles: 3 splits would not fit
    assert choose_split_k(256, 4096, 4096, 128, 128, 128, 132, 1) == 2  # 64 tiles, 132 resident
    assert choose_split_k(256, 4096, 4096, 128, 128, 128, 132, 2) == 4
    assert choose_split_k(256, 28672, 4096, 128, 128, 128, 132) == 1  # 448 tiles: more than fit
    assert choose_split_k(1, 64, 256, 16, 64, 128, 132) == 1  # 2 K tiles: too few to split
    assert choose_split_k(1, 8, 1 << 20, 16, 64, 128, 132) == 16  # capped


@pytest.mark.points(2)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("m,k,opts", [
    (40, 640, {"split_k": 3}),  # uneven splits of 5 K tiles
    (70, 640, {"block_m": 64, "block_n": 32, "split_k": 1}),  # two row tiles, the last partial
    (33, 640, {}),  # just past the 32-row tile: the launcher's own choice
    (48, 576, {"split_k": 2}),  # 4.5 groups: the last K tile half past K
], ids=["m40-s3", "m70-tiles", "m33", "m48-k576"])
def test_prefill_sizes_on_the_sequential_fast_path(oracles, tol, device, m, k, opts, dtype):
    check(*run(oracles, device, m, k, 72, 128, False, dtype, seed=27, group_size=128, **opts), tol)


@pytest.mark.parametrize("layout", ["column-major", "every-other-column"])
def test_prefill_with_strided_activations(oracles, tol, device, layout):
    t, w = oracles.random_v1(256, 64, 128, False, seed=28)
    a = torch.randn(48, 256, generator=torch.Generator().manual_seed(29)).half().to(device)  # M = 48: transposed kernel
    tensors = [t[key].to(device) for key in KEYS]
    check(matmul_of_a_view(_view_base(a, layout), layout, tensors, group_size=128), a, w, tol)


@pytest.mark.kernels()
@pytest.mark.parametrize("bad", ["a_fp32", "qzeros_shape", "g_idx_int64", "split0", "block48"])
def test_bad_inputs_raise_value_error(oracles, device, bad):
    t, _ = oracles.random_v1(256, 64, 32, False, seed=26)
    args = {"a": torch.randn(3, 256).half(), **t}
    # the same inputs unspoilt multiply (a function that always raises earns nothing here)
    assert w4a16_matmul(**{key: v.to(device) for key, v in args.items()}).shape == (3, 64)
    opts = {}
    if bad == "a_fp32":
        args["a"] = args["a"].float()
    elif bad == "qzeros_shape":
        args["qzeros"] = args["qzeros"][:, :4].contiguous()
    elif bad == "g_idx_int64":
        args["g_idx"] = args["g_idx"].long()
    else:
        opts = {"split_k": 0} if bad == "split0" else {"block_k": 48}
    with pytest.raises(ValueError):
        w4a16_matmul(**{key: v.to(device) for key, v in args.items()}, **opts)


# --- choose_split_k where rounding matters ----------------------------------------------------
# choose_split_k where rounding matters: the handout's rule allows at most K tiles / 4 splits (each
# split keeps at least 4 whole K tiles), so a K-tile count that is not a multiple of 4 rounds the
# split count down, never up; a partial last K tile is still a tile the kernel runs. At every shape
# below the resident-programs term (264 // 64 output tiles = 4) does not bind, so only that rule
# decides.

M, N, BLOCK_M, BLOCK_N, BLOCK_K, SMS = 1, 4096, 16, 64, 128, 132  # 64 output tiles, 264 resident


def _case(k: int) -> str:
    return f"choose_split_k(m={M}, n={N}, k={k}, block_m={BLOCK_M}, block_n={BLOCK_N}, block_k={BLOCK_K}, num_sms={SMS})"


@pytest.mark.kernels()
@pytest.mark.points(1)
def test_split_k_rounds_k_tiles_over_4_down():
    for k_tiles, splits in [(5, 1), (6, 1), (7, 1), (10, 2), (11, 2), (14, 3), (15, 3)]:
        k = k_tiles * BLOCK_K
        got = choose_split_k(M, N, k, BLOCK_M, BLOCK_N, BLOCK_K, SMS)
        assert got == splits, (f"{_case(k)} = {got}: {k_tiles} K tiles allow at most {k_tiles} // 4 = {splits} "
                               "splits of at least 4 tiles each (rounded down, not up)")


@pytest.mark.kernels()
@pytest.mark.points(1)
def test_split_k_counts_a_partial_last_k_tile():
    for k, splits in [(1984, 4), (1472, 3), (960, 2)]:
        k_tiles = -(-k // BLOCK_K)
        got = choose_split_k(M, N, k, BLOCK_M, BLOCK_N, BLOCK_K, SMS)
        assert got == splits, (f"{_case(k)} = {got}: K = {k} is {k_tiles} K tiles of {BLOCK_K} (the last "
                               f"partial), so at most {k_tiles} // 4 = {splits} splits")
