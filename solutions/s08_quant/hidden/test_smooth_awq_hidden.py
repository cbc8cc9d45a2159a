"""SmoothQuant and AWQ, thoroughly: zero channels, validation, 3-D activations, the search loop."""

import pytest
import torch
from quant import (
    INT4_G128,
    IntQuantConfig,
    apply_smoothing,
    awq_fake_quant_weight,
    awq_scales,
    awq_search,
    channel_absmax,
    output_error,
    smooth_scales,
    w8a8_linear,
)


@pytest.mark.points(1)
def test_dead_channels_get_scale_one():
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(32, 8, generator=gen, dtype=torch.float64), torch.randn(4, 8, generator=gen, dtype=torch.float64)
    x[:, 2] = 0.0
    w[:, 5] = 0.0
    s = smooth_scales(x, w, 0.5)
    assert s[2] == 1.0 and s[5] == 1.0 and torch.isfinite(s).all()


@pytest.mark.points(1)
def test_smooth_scales_validate_alpha_and_shapes():
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    for alpha in (0.0, 1.0):  # the ends of [0, 1] are valid
        assert smooth_scales(x, w, alpha).shape == (8,)
    for alpha in (-0.1, 1.5):
        with pytest.raises(ValueError):
            smooth_scales(x, w, alpha)
    with pytest.raises(ValueError):
        smooth_scales(x, torch.randn(3, 7), 0.5)


@pytest.mark.points(2)
@pytest.mark.parametrize("alpha", [0.0, 0.25, 1.0])
def test_three_dim_activations_and_the_ends_of_alpha(tol, alpha):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 16, 32, generator=gen, dtype=torch.float64) * torch.logspace(-1, 1, 32, dtype=torch.float64)
    w = torch.randn(24, 32, generator=gen, dtype=torch.float64)
    ax, aw = x.abs().amax(dim=(0, 1)), w.abs().amax(dim=0)
    torch.testing.assert_close(channel_absmax(x), ax, **tol("exact"))
    s = smooth_scales(x, w, alpha)
    torch.testing.assert_close(s, ax**alpha / aw ** (1 - alpha), **tol("fp64 identity"))
    xs, ws = apply_smoothing(x, w, s)
    torch.testing.assert_close(xs @ ws.T, x @ w.T, **tol("fp64 identity"))
    if alpha == 1.0:  # all of the range moves to the weights: every activation channel peaks at 1
        torch.testing.assert_close(channel_absmax(xs), torch.ones(32, dtype=torch.float64), **tol("fp64 identity"))


@pytest.mark.points(2)
def test_w8a8_linear_is_per_tensor_symmetric_int8_on_both_sides(oracles, tol):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 10, 64, generator=gen, dtype=torch.float64) + 0.5
    w = torch.randn(20, 64, generator=gen, dtype=torch.float64) - 0.3
    xq = oracles.int(x, 8, True, "tensor")[3]
    wq = oracles.int(w, 8, True, "tensor")[3]
    torch.testing.assert_close(w8a8_linear(x, w), xq @ wq.T, **tol("fp64 identity"))


def awq_oracle(x, w, alpha, cfg, oracles):
    """w_hat and the output error of one grid point, from the handout's definitions."""
    m = x.abs().reshape(-1, x.shape[-1]).mean(dim=0)
    s = (m**alpha).clamp(min=1e-4)
    s = s / (s.max() * s.min()).sqrt()
    w_hat = oracles.int(w * s, cfg.bits, cfg.symmetric, cfg.granularity, cfg.group_size)[3] / s
    return s, w_hat, float(((x @ w.T - x @ w_hat.T) ** 2).mean())


@pytest.mark.points(3)
def test_every_grid_point_and_the_choice_match_the_oracle(oracles, tol):
    gen = torch.Generator().manual_seed(3)
    mag = torch.ones(192)
    mag[torch.randperm(192, generator=gen)[:6]] = 15.0
    x = torch.randn(64, 192, generator=gen) * mag
    w = torch.randn(96, 192, generator=gen) / 192**0.5
    cfg = IntQuantConfig(4, False, "group", 64)
    r = awq_search(x, w, cfg, grid=4)
    expected = [awq_oracle(x, w, i / 4, cfg, oracles) for i in range(5)]
    torch.testing.assert_close(torch.tensor(r.errors), torch.tensor([e[2] for e in expected]), **tol("fp32 loss"))
    best = min(range(5), key=lambda i: expected[i][2])
    assert r.alpha == best / 4
    s, w_hat, _ = expected[best]
    torch.testing.assert_close(r.scales, s, rtol=1e-6, atol=0)
    torch.testing.assert_close(r.w_hat, w_hat, rtol=1e-5, atol=1e-6)


@pytest.mark.points(1)
def test_alpha_zero_is_plain_round_to_nearest(oracles, tol):
    gen = torch.Generator().manual_seed(4)
    x, w = torch.randn(16, 128, generator=gen), torch.randn(32, 128, generator=gen)
    ones = torch.ones(128)
    rtn = oracles.int(w, 4, False, "group", 128)[3]
    torch.testing.assert_close(awq_fake_quant_weight(w, ones, INT4_G128), rtn, **tol("exact"))
    r = awq_search(x, w, INT4_G128, grid=1)
    assert len(r.errors) == 2
    torch.testing.assert_close(torch.tensor(r.errors[0]), torch.tensor(output_error(x, w, rtn)), **tol("fp32 loss"))


@pytest.mark.points(1)
def test_awq_weight_is_returned_in_the_original_basis(oracles, tol):
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(8, 128, generator=gen, dtype=torch.float64)
    s = torch.rand(128, generator=gen, dtype=torch.float64) + 0.5
    expected = oracles.int(w * s, 4, False, "group", 128)[3] / s
    torch.testing.assert_close(awq_fake_quant_weight(w, s, INT4_G128), expected, **tol("exact"))


@pytest.mark.points(1)
def test_output_error_is_the_mean_squared_output_difference(tol):
    gen = torch.Generator().manual_seed(6)
    x, w, w2 = (torch.randn(*shape, generator=gen, dtype=torch.float64) for shape in ((5, 7), (3, 7), (3, 7)))
    expected = float(((x @ (w - w2).T) ** 2).mean())
    torch.testing.assert_close(torch.tensor(output_error(x, w, w2)), torch.tensor(expected), **tol("fp64 loss"))


@pytest.mark.points(1)
def test_awq_search_validates_the_grid():
    assert len(awq_search(torch.randn(4, 128), torch.randn(4, 128), INT4_G128, grid=1).errors) == 2  # grid 1 is valid
    with pytest.raises(ValueError):
        awq_search(torch.randn(4, 128), torch.randn(4, 128), INT4_G128, grid=0)


@pytest.mark.points(1)
def test_awq_search_keeps_the_first_alpha_of_a_tie():
    """Every channel with the same mean |x|: every alpha gives s = 1 and the same error, so the
    first grid point (alpha = 0) must be kept."""
    x = torch.ones(16, 256) * torch.tensor([1.0, -1.0]).repeat(128)
    w = torch.randn(8, 256, generator=torch.Generator().manual_seed(3))
    result = awq_search(x, w, INT4_G128, grid=4)
    assert len(set(result.errors)) == 1, result.errors  # the tie this test is about
    assert result.alpha == 0.0


@pytest.mark.points(1)
def test_awq_scales_average_over_every_dim_but_the_last():
    """x (B, T, K): m = mean |x| over B and T (the oracle: the handout's formula on the flattened rows)."""
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * torch.arange(1, 9)
    for alpha in (0.25, 0.5, 1.0):
        m = x.abs().reshape(-1, 8).mean(0)
        s = torch.clamp(m**alpha, min=1e-4)
        s = s / torch.sqrt(s.max() * s.min())
        got = awq_scales(x, alpha)
        assert got.shape == (8,)
        torch.testing.assert_close(got, s, rtol=1e-12, atol=0)  # same formula, same dtype: rounding only
