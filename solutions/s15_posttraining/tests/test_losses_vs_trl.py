"""The losses against TRL 1.16.0 on the same tensors (conftest.py: how each TRL method is called).
Values and gradients with respect to the policy's log-probs must agree."""

from __future__ import annotations

import pytest
import torch
from conftest import (close, dpo_run, grpo_run, policy_batch, ppo_policy_run, simpo_run, trl_batch_logps,
                      trl_dpo_loss, trl_group_advantages, trl_grpo_loss, trl_simpo_loss)

from posttrain import completion_logprobs, group_advantages


@pytest.mark.points(2)
def test_completion_logprobs_sum_matches_trl(tol):
    g = torch.Generator().manual_seed(1)
    logits, ids = torch.randn(3, 9, 17, generator=g), torch.randint(0, 17, (3, 9), generator=g)
    prompt_lengths, lengths = torch.tensor([2, 4, 1]), torch.tensor([9, 7, 5])
    logps, mask = completion_logprobs(logits, ids, prompt_lengths, lengths)
    want = trl_batch_logps(logits, ids, prompt_lengths, lengths)
    close((logps * mask).sum(-1), want, tol("loss vs TRL"),
          "sum of logps * mask per sequence vs TRL's get_batch_logps (prompt lengths [2, 4, 1], lengths [9, 7, 5])")


@pytest.mark.points(2)
def test_group_advantages_match_trl(tol):
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.2, 0.9, 0.1])
    close(group_advantages(rewards, 4), trl_group_advantages(rewards, 4), tol("loss vs TRL"),
          f"group_advantages({rewards.tolist()}, group_size=4)")


@pytest.mark.points(1)
@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_grpo_loss_matches_trl(loss_type, tol):
    logps, old, ref, mask, _ = policy_batch(2, 4, 6)
    adv = torch.tensor([1.2, -0.7, 0.3, -0.8])
    config = {"loss_type": loss_type, "beta": 0.04, "max_completion_length": 6}
    got, got_grad = grpo_run(logps, old, ref, adv, mask, config)
    want, want_grad = trl_grpo_loss(logps, old, ref, adv, mask, **config)
    close(got, want, tol("loss vs TRL"), f"grpo_loss, {config}")
    close(got_grad, want_grad, tol("gradient vs TRL"), f"d grpo_loss / d logps, {config}")


@pytest.mark.points(2)
def test_ppo_policy_loss_matches_trl(tol):
    logps, old, _, mask, _ = policy_batch(3, 3, 5)
    adv = torch.randn(3, 5, generator=torch.Generator().manual_seed(4))
    got, got_grad = ppo_policy_run(logps, old, adv, mask, 0.2)
    want, want_grad = trl_grpo_loss(logps, old, None, adv, mask, loss_type="bnpo")  # per-token advantages
    close(got, want, tol("loss vs TRL"), "ppo_policy_loss, clip_eps 0.2")
    close(got_grad, want_grad, tol("gradient vs TRL"), "d ppo_policy_loss / d logps, clip_eps 0.2")


@pytest.mark.points(2)
def test_dpo_loss_matches_trl(tol):
    g = torch.Generator().manual_seed(5)
    chosen, rejected, ref_c, ref_r = (-20 - 5 * torch.rand(4, generator=g) for _ in range(4))
    got, gc, gr, _, _ = dpo_run(chosen, rejected, ref_c, ref_r, 0.1)
    want, wc, wr, _, _ = trl_dpo_loss(chosen, rejected, ref_c, ref_r, 0.1)
    close(got, want, tol("loss vs TRL"), "dpo_loss, beta 0.1")
    close(torch.stack([gc, gr]), torch.stack([wc, wr]), tol("gradient vs TRL"), "d dpo_loss / d (chosen, rejected)")


@pytest.mark.points(1)
def test_simpo_loss_matches_trl(tol):
    chosen, rejected = torch.tensor([-1.1, -2.0, -0.7]), torch.tensor([-1.5, -1.9, -2.2])
    got, gc, gr = simpo_run(chosen, rejected, 2.0, 0.5)
    want, wc, wr = trl_simpo_loss(chosen, rejected, 2.0, 0.5)
    close(got, want, tol("loss vs TRL"), "simpo_loss, beta 2.0, gamma 0.5")
    close(torch.stack([gc, gr]), torch.stack([wc, wr]), tol("gradient vs TRL"), "d simpo_loss / d (chosen, rejected)")
