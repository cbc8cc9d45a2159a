"""More of GPTQ against the naive OBS oracle: lazy blocks across groups, dead columns, 16 bits,
asymmetric grids, act-order's g_idx and its packing, and the config's validation."""

import pytest
import torch
from gptq import GPTQ, QuantConfig, dequantize_v1, pack_v1, rtn

pytestmark = pytest.mark.kernels()  # torch code, no Triton kernel


def correlated(n_rows, k, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n_rows, k, generator=g, dtype=torch.float64) @ torch.randn(k, k, generator=g, dtype=torch.float64)


def weights(n, k, seed):
    return torch.randn(n, k, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def compare(r, oracle_out, tol):
    """Codes equal (the oracle followed r's codes at exact rounding ties), weights to the tolerance."""
    codes, deq, g_idx = oracle_out
    same = r.codes == codes.to(torch.int32)
    assert same.all(), f"{int((~same).sum())} codes differ"
    torch.testing.assert_close(r.weight[same], deq[same], **tol("gptq vs naive OBS"))
    torch.testing.assert_close(r.g_idx, g_idx.to(torch.int32), **tol("exact"))


@pytest.mark.points(2)
@pytest.mark.parametrize("group,block,act,sym", [
    (8, 32, False, True),  # four groups per lazy block
    (32, 8, False, True),  # a group spans four lazy blocks
    (16, 16, True, False),  # act-order, asymmetric
    (-1, 24, True, True),  # per-channel, a block size that does not divide K
])
def test_lazy_blocks_equal_the_naive_obs_procedure(oracles, tol, group, block, act, sym):
    x, w = correlated(400, 96, seed=10), weights(20, 96, seed=11)
    g = GPTQ(96)
    g.add_batch(x[:150])
    g.add_batch(x[150:])
    cfg = QuantConfig(4, group, sym=sym, desc_act=act, block_size=block, damp_percent=0.05)
    r = g.quantize(w, cfg)
    compare(r, oracles.gptq(w, oracles.hessian(x), 4, group, sym, 0.05, act, follow=r.codes), tol)


@pytest.mark.points(2)
def test_dead_columns_quantize_to_zero_and_the_rest_follows_obs(oracles, tol):
    x, w = correlated(300, 48, seed=12), weights(16, 48, seed=13)
    x[:, [3, 17, 40]] = 0  # inputs that never fire
    g = GPTQ(48)
    g.add_batch(x)
    r = g.quantize(w, QuantConfig(4, 16, block_size=16))
    assert torch.equal(r.weight[:, [3, 17, 40]], torch.zeros(16, 3, dtype=r.weight.dtype))
    compare(r, oracles.gptq(w, oracles.hessian(x), 4, 16, follow=r.codes), tol)


def test_sixteen_bits_return_w_up_to_rounding(tol):
    x, w = correlated(256, 64, seed=14), weights(8, 64, seed=15)
    g = GPTQ(64)
    g.add_batch(x)
    q = g.quantize(w, QuantConfig(16, 32, block_size=32)).weight
    assert float((q - w).abs().max() / w.abs().max()) < tol("16-bit GPTQ")["rtol"]


@pytest.mark.points(2)
def test_act_order_g_idx_follows_descending_hessian_diagonal_and_packs(oracles, tol):
    x = correlated(512, 64, seed=16) * torch.linspace(0.1, 3.0, 64, dtype=torch.float64)  # distinct diagonals
    w = weights(16, 64, seed=17)
    g = GPTQ(64)
    g.add_batch(x)
    r = g.quantize(w, QuantConfig(4, 16, desc_act=True, block_size=32))
    order = torch.argsort(torch.diag(oracles.hessian(x)), descending=True)
    expected = torch.empty(64, dtype=torch.int32)
    expected[order] = (torch.arange(64) // 16).to(torch.int32)  # the j-th column in that order: group j // 16
    torch.testing.assert_close(r.g_idx, expected, **tol("exact"))
    recon = r.scales[r.g_idx.long()].T * (r.codes - r.zeros[r.g_idx.long()].T)
    torch.testing.assert_close(r.weight, recon, **tol("exact"))
    t = pack_v1(r)
    torch.testing.assert_close(dequantize_v1(t), oracles.dequant(*(t[k] for k in ("qweight", "qzeros", "scales", "g_idx"))),
                               **tol("exact"))
    torch.testing.assert_close(dequantize_v1(t).double(), r.weight, **tol("fp16 scales"))


def test_rtn_per_channel_and_a_partial_last_group(oracles, tol):
    w = weights(10, 40, seed=18)
    w[3] = 0  # an all-zero row: the range [-1, 1]
    for cfg in (QuantConfig(4, -1, sym=False), QuantConfig(3, 16, sym=True, block_size=32)):
        torch.testing.assert_close(rtn(w, cfg).weight, oracles.rtn(w, cfg), **tol("exact"))


@pytest.mark.parametrize("kwargs", [{"bits": 1}, {"bits": 17}, {"group_size": 0}, {"group_size": 48},
                                    {"damp_percent": -0.1}, {"damp_percent": float("nan")}, {"block_size": 0}])
def test_bad_configs_raise_value_error(kwargs):
    good = QuantConfig(3, 64, sym=False)  # a valid config is accepted as given (one that always raises earns nothing)
    assert (good.bits, good.group_size, good.sym) == (3, 64, False)
    with pytest.raises(ValueError):
        QuantConfig(**kwargs)


def test_quantize_before_any_batch_raises_value_error():
    g = GPTQ(8)
    with pytest.raises(ValueError):
        g.quantize(torch.zeros(4, 8, dtype=torch.float64), QuantConfig(4, -1))
    g.add_batch(torch.randn(16, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    assert g.quantize(torch.ones(4, 8, dtype=torch.float64), QuantConfig(4, -1)).weight.shape == (4, 8), (
        "after add_batch the same call must quantize")


def test_non_finite_inputs_raise_value_error_not_nans():
    finite = GPTQ(8)
    finite.add_batch(torch.randn(16, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    w = torch.randn(4, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert finite.quantize(w, QuantConfig(4, -1)).weight.isfinite().all(), "finite inputs must quantize"
    g = GPTQ(8)
    g.add_batch(torch.full((4, 8), float("nan"), dtype=torch.float64))
    with pytest.raises(ValueError):
        g.quantize(torch.ones(4, 8, dtype=torch.float64), QuantConfig(4, -1))


def test_asymmetric_one_sided_rows_get_zero_point_zero_and_v1_refuses_them(oracles, tol):
    """All-positive rows: the range is forced down to 0, so the zero point is 0, which v1 cannot
    store (zero - 1 = -1); a grid on [min, max] instead gives a negative zero."""
    w = torch.rand(6, 32, generator=torch.Generator().manual_seed(40), dtype=torch.float64) + 0.1
    r = rtn(w, QuantConfig(4, 16, sym=False))
    for j in range(2):
        scale, zero = oracles.grid(w[:, 16 * j : 16 * (j + 1)], 4, False)
        torch.testing.assert_close(r.zeros[j].double(), zero, **tol("exact"))
        torch.testing.assert_close(r.scales[j].double(), scale, **tol("exact"))
    assert (r.zeros == 0).all()
    with pytest.raises(ValueError):
        pack_v1(r)
