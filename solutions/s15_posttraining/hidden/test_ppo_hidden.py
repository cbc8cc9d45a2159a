"""GAE's direction and its two discounts, padding, and the value loss's clipping, in float64."""

from __future__ import annotations

import pytest
import torch
from conftest import close, gae_oracle, ppo_value_run, value_loss_oracle

from posttrain import gae


@pytest.mark.points(2)
@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.5, 0.9), (0.99, 0.0), (0.9, 1.0)])
def test_gae_discounts_and_direction(gamma, lam, tol):
    g = torch.Generator().manual_seed(21)
    rewards, values = torch.randn(3, 7, generator=g), torch.randn(3, 7, generator=g)
    mask = (torch.arange(7)[None] < torch.tensor([[7], [4], [1]])).float()
    adv, ret = gae(rewards, values, mask, gamma, lam)
    want_adv, want_ret = gae_oracle(rewards, values, mask, gamma, lam)
    case = f"gae, gamma {gamma}, lam {lam}, lengths [7, 4, 1] (A_t sums the deltas after t, not before)"
    close(adv, want_adv, tol("float64 oracle"), case)
    close(ret, want_ret, tol("float64 oracle"), f"returns of {case}")


@pytest.mark.points(1)
def test_gae_ignores_what_padding_holds(tol):
    """Rewards and values written into the padding must change nothing."""
    rewards, values = torch.tensor([[0.0, 0.0, 1.0, 9.0, 9.0]]), torch.tensor([[0.5, 0.2, 0.7, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1, 1, 0, 0]])
    adv, _ = gae(rewards, values, mask, 0.9, 0.95)
    want, _ = gae_oracle(rewards, values, mask, 0.9, 0.95)
    close(adv, want, tol("float64 oracle"), "gae with 9.0 written in the padding of a 3-token completion")


@pytest.mark.points(1)
def test_gae_refuses_discounts_outside_0_1():
    with pytest.raises(ValueError):
        gae(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), 1.5, 0.9)
    gae(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), 1.0, 1.0)


@pytest.mark.points(2)
def test_value_loss_clips_both_ways(tol):
    """New values far above and below the old ones, returns on either side."""
    old = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0, 1.0]])
    values = torch.tensor([[0.5, -0.5, 0.5, -0.5, 1.1, 0.0]])
    returns = torch.tensor([[1.0, -1.0, -1.0, 1.0, 1.0, 1.0]])
    mask = torch.ones(1, 6)
    got, got_grad = ppo_value_run(values, old, returns, mask, 0.2)
    want, want_grad = value_loss_oracle(values, old, returns, mask, 0.2)
    close(got, want, tol("float64 oracle"), f"ppo_value_loss, old {old.tolist()}, new {values.tolist()}, returns {returns.tolist()}")
    close(got_grad, want_grad, tol("float64 oracle"), "d ppo_value_loss / d values (0 where the clipped term wins)")
