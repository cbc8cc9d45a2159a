"""GAE and the value loss against the papers' formulas (float64), and GRPO's on-policy property."""

from __future__ import annotations

import pytest
import torch
from conftest import close, gae_oracle, grpo_run, policy_batch, ppo_value_run, trl_grpo_loss, value_loss_oracle

from posttrain import gae


@pytest.mark.points(2)
def test_gae_matches_the_papers_sum(tol):
    g = torch.Generator().manual_seed(6)
    rewards, values = torch.randn(2, 5, generator=g), torch.randn(2, 5, generator=g)
    mask = torch.tensor([[1.0] * 5, [1, 1, 1, 0, 0]])
    adv, ret = gae(rewards, values, mask, 0.9, 0.8)
    want_adv, want_ret = gae_oracle(rewards, values, mask, 0.9, 0.8)
    close(adv, want_adv, tol("float64 oracle"), "gae advantages, gamma 0.9, lam 0.8, second row 3 tokens")
    close(ret, want_ret, tol("float64 oracle"), "gae returns (advantages + values), gamma 0.9, lam 0.8")


@pytest.mark.points(1)
def test_value_loss_matches_the_clipped_formula(tol):
    g = torch.Generator().manual_seed(7)
    values, old, returns = torch.randn(2, 4, generator=g), torch.randn(2, 4, generator=g), torch.randn(2, 4, generator=g)
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 0, 0]])
    got, got_grad = ppo_value_run(values, old, returns, mask, 0.2)
    want, want_grad = value_loss_oracle(values, old, returns, mask, 0.2)
    close(got, want, tol("float64 oracle"), "ppo_value_loss, clip_eps 0.2")
    close(got_grad, want_grad, tol("float64 oracle"), "d ppo_value_loss / d values, clip_eps 0.2")


@pytest.mark.points(2)
def test_on_policy_grpo_loss_is_zero_but_its_gradient_is_not(tol):
    """beta 0, old_logps = logps: ratio 1, so the loss is -mean(A) over tokens with zero-mean A...
    exactly 0 here (A sums to 0 over equal-length rows), but d loss / d logps = -A / (tokens)."""
    logps, _, _, _, _ = policy_batch(8, 4, 5)
    mask = torch.ones(4, 5)
    adv = torch.tensor([1.5, -1.5, 0.5, -0.5])
    got, got_grad = grpo_run(logps, logps.clone(), None, adv, mask, {"loss_type": "bnpo"})
    _, want_grad = trl_grpo_loss(logps, logps.clone(), None, adv, mask, loss_type="bnpo")
    assert float(got) == 0.0, f"on-policy GRPO loss with beta 0 and advantages summing to 0: got {float(got)}, expected 0"
    assert float(got_grad.abs().max()) > 0, "the on-policy gradient must not vanish: the loss is 0, its gradient is -A/N"
    close(got_grad, want_grad, tol("gradient vs TRL"), "on-policy d grpo_loss / d logps (bnpo)")
