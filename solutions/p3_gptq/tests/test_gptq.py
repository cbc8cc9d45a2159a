"""RTN and GPTQ against independent oracles: GPTQ's grid, and the naive column-by-column OBS."""

import pytest
import torch
from gptq import GPTQ, QuantConfig, rtn

pytestmark = pytest.mark.kernels()  # torch code, no Triton kernel


def correlated(n_rows: int, k: int, seed: int) -> torch.Tensor:
    """Inputs with correlated channels (a random mixing matrix), as a layer's activations are."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n_rows, k, generator=g, dtype=torch.float64) @ torch.randn(k, k, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("sym", [True, False], ids=["sym", "asym"])
def test_rtn_matches_the_grid_group_by_group(oracles, tol, sym):
    w = torch.randn(12, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    r = rtn(w, QuantConfig(4, 16, sym=sym))
    for j in range(4):
        scale, zero = oracles.grid(w[:, 16 * j : 16 * (j + 1)], 4, sym)
        torch.testing.assert_close(r.scales[j], scale, **tol("exact"))
        torch.testing.assert_close(r.zeros[j], zero.to(torch.int32), **tol("exact"))
        codes = torch.clamp(torch.round(w[:, 16 * j : 16 * (j + 1)] / scale[:, None]) + zero[:, None], 0, 15)
        torch.testing.assert_close(r.codes[:, 16 * j : 16 * (j + 1)], codes.to(torch.int32), **tol("exact"))
    torch.testing.assert_close(r.g_idx, (torch.arange(64) // 16).to(torch.int32), **tol("exact"))


def test_add_batch_keeps_the_running_average_of_2_x_xt_over_n(oracles, tol):
    x = correlated(300, 16, seed=1)
    g = GPTQ(16)
    for chunk in (x[:10], x[10:200].reshape(19, 10, 16), x[200:]):  # leading dims flattened
        g.add_batch(chunk)
    assert g.nsamples == 300
    torch.testing.assert_close(g.H, oracles.hessian(x), **tol("fp64 identity"))


@pytest.mark.parametrize("group,act", [(16, False), (-1, False), (16, True)], ids=["g16", "channel", "g16-act"])
def test_gptq_equals_the_naive_obs_procedure(oracles, tol, group, act):
    x, w = correlated(512, 64, seed=2), torch.randn(24, 64, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    g = GPTQ(64)
    g.add_batch(x)
    r = g.quantize(w, QuantConfig(4, group, desc_act=act, block_size=32))
    # At an exact rounding tie (x / scale half-way between two codes) either code is right: the
    # oracle takes yours there and follows the same path for the rest of the row.
    codes, deq, g_idx = oracles.gptq(w, oracles.hessian(x), 4, group, act_order=act, follow=r.codes)
    same = r.codes == codes.to(torch.int32)
    assert same.all(), f"{int((~same).sum())} codes differ"
    torch.testing.assert_close(r.weight[same], deq[same], **tol("gptq vs naive OBS"))
    torch.testing.assert_close(r.g_idx, g_idx.to(torch.int32), **tol("exact"))


def test_gptq_cuts_rtns_output_error_by_30_percent_on_correlated_inputs(oracles):
    x = correlated(1024, 128, seed=4)
    w = torch.randn(32, 128, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    g = GPTQ(128)
    g.add_batch(x)
    cfg = QuantConfig(4, 32)
    e_gptq, e_rtn = oracles.mse(x, w, g.quantize(w, cfg).weight), oracles.mse(x, w, oracles.rtn(w, cfg))
    # GPTQ minimizes exactly this error; RTN ignores X. Measured (CPU, fp64) on seeds (4, 5), (6, 7),
    # (8, 9): GPTQ 0.46, 0.50, 0.49 of RTN's error; RTN with a per-group clip search (no error
    # compensation) 0.91, 0.87, 0.82; plain RTN 1.0. The bar, 0.7, sits 0.2 above GPTQ and below the best RTN.
    assert e_gptq <= 0.7 * e_rtn, (
        f"output MSE {e_gptq:.4g} is {e_gptq / e_rtn:.3f} of RTN's {e_rtn:.4g}; GPTQ's error compensation reaches "
        "about 0.5 here, rounding alone (even with a clip search) no better than 0.8")


def test_an_indefinite_hessian_after_damping_raises_a_clear_error(monkeypatch):
    g = GPTQ(2)
    g.add_batch(torch.ones(4, 2, dtype=torch.float64))
    # Eigenvalues 3 and -1: 1% damping (0.01) cannot make it positive definite.
    monkeypatch.setattr(g, "H", torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64))  # eigenvalues 3, 1
    assert g.quantize(torch.randn(4, 2, dtype=torch.float64), QuantConfig(4, -1)).weight.shape == (4, 2)
    monkeypatch.setattr(g, "H", torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="positive definite"):
        g.quantize(torch.randn(4, 2, dtype=torch.float64), QuantConfig(4, -1))
