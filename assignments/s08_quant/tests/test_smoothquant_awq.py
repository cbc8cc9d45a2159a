"""SmoothQuant's migration and AWQ's scale search on linears with planted outlier channels."""

import pytest
import torch
from quant import (
    INT4_G128,
    apply_smoothing,
    awq_scales,
    awq_search,
    channel_absmax,
    fake_quant,
    smooth_scales,
    w8a8_linear,
)


def outlier_linear(seed: int, t: int = 512, k: int = 256, n: int = 512, boost: float = 60.0):
    """x (t, k) with 4 activation channels `boost` times larger than the rest, w (n, k); float64."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(t, k, generator=gen, dtype=torch.float64)
    x[:, torch.randperm(k, generator=gen)[:4]] *= boost
    w = torch.randn(n, k, generator=gen, dtype=torch.float64) / k**0.5
    return x, w


@pytest.mark.points(2)
def test_smooth_scales_follow_the_formula(tol):
    x, w = outlier_linear(0)
    for alpha in (0.5, 0.8):
        ax, aw = x.abs().amax(dim=0), w.abs().amax(dim=0)
        torch.testing.assert_close(channel_absmax(x), ax, **tol("exact"))
        expected = ax**alpha / aw ** (1 - alpha)  # fp64, the definition
        torch.testing.assert_close(smooth_scales(x, w, alpha), expected, **tol("fp64 identity"))


@pytest.mark.points(2)
def test_smoothing_leaves_the_product_unchanged_and_flattens_the_activations(tol):
    x, w = outlier_linear(1)
    s = smooth_scales(x, w, 0.5)
    xs, ws = apply_smoothing(x, w, s)
    torch.testing.assert_close(xs @ ws.T, x @ w.T, **tol("fp64 identity"))
    before, after = channel_absmax(x), channel_absmax(xs)
    # max / median channel range: 65 before, 8.1 after in the reference (seeds 0-2: 65-70 -> 8.0-8.8).
    assert after.max() / after.median() < 0.3 * (before.max() / before.median())


@pytest.mark.points(3)
def test_w8a8_error_drops_after_smoothing():
    x, w = outlier_linear(2)
    exact = x @ w.T
    s = smooth_scales(x, w, 0.5)
    plain = (w8a8_linear(x, w) - exact).norm() / exact.norm()
    smoothed = (w8a8_linear(*apply_smoothing(x, w, s)) - exact).norm() / exact.norm()
    # The reference measured 0.0694 -> 0.0167 (ratio 0.24; seeds 0-2: 0.235-0.241); gate at 0.5.
    assert smoothed < 0.5 * plain


@pytest.mark.points(2)
def test_awq_scales_are_mean_magnitudes_to_the_alpha_normalised(tol):
    x, _ = outlier_linear(3)
    for alpha in (0.0, 0.35, 1.0):
        s = (x.abs().mean(dim=0) ** alpha).clamp(min=1e-4)
        expected = s / (s.max() * s.min()).sqrt()
        torch.testing.assert_close(awq_scales(x, alpha), expected, **tol("fp64 identity"))


@pytest.mark.points(3)
def test_awq_search_starts_at_rtn_and_beats_it(tol):
    gen = torch.Generator().manual_seed(4)
    mag = torch.ones(512)
    mag[torch.randperm(512, generator=gen)[:8]] = 20.0  # 8 salient input channels
    x = torch.randn(256, 512, generator=gen) * mag
    w = torch.randn(256, 512, generator=gen) / 512**0.5
    r = awq_search(x, w, INT4_G128, grid=10)
    assert len(r.errors) == 11
    rtn = float(((x @ w.T - x @ fake_quant(w, INT4_G128).T) ** 2).mean())  # alpha = 0: s = 1
    torch.testing.assert_close(torch.tensor(r.errors[0]), torch.tensor(rtn), **tol("fp32 loss"))
    assert r.errors.index(min(r.errors)) == round(r.alpha * 10)
    # The reference measured AWQ / RTN = 0.39 here (seeds 0-2 at grid 20: 0.398-0.404); gate at 0.6.
    assert min(r.errors) < 0.6 * r.errors[0]
