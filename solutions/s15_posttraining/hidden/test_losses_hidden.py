"""The pitfalls of RL losses, each on a case built to expose one bug, against TRL 1.16.0."""

from __future__ import annotations

import pytest
import torch
from conftest import (close, dpo_run, grpo_run, policy_batch, ppo_policy_run, simpo_run, trl_batch_logps,
                      trl_dpo_loss, trl_group_advantages, trl_grpo_loss, trl_simpo_loss)

from posttrain import GRPOConfig, completion_logprobs, group_advantages, masked_mean


@pytest.mark.points(2)
def test_prompt_tokens_are_masked_out_exactly(tol):
    """Prompt lengths 1..T-1 and padding: the mask must be 1 exactly on the completion's predicted tokens."""
    g = torch.Generator().manual_seed(11)
    logits, ids = torch.randn(4, 8, 13, generator=g), torch.randint(0, 13, (4, 8), generator=g)
    prompt_lengths, lengths = torch.tensor([1, 3, 7, 5]), torch.tensor([8, 4, 8, 8])
    logps, mask = completion_logprobs(logits, ids, prompt_lengths, lengths)
    want_mask = torch.tensor([[int(p <= t + 1 < n) for t in range(7)] for p, n in zip([1, 3, 7, 5], [8, 4, 8, 8])])
    assert mask.tolist() == want_mask.float().tolist(), (
        f"completion mask for prompt lengths [1, 3, 7, 5], lengths [8, 4, 8, 8]:\n  got      {mask.tolist()}\n"
        f"  expected {want_mask.tolist()}  (mask[b, t] = 1 iff token t + 1 is a completion token)")
    close((logps * mask).sum(-1) / mask.sum(-1), trl_batch_logps(logits, ids, prompt_lengths, lengths, average=True),
          tol("loss vs TRL"), "mean completion log-prob vs TRL's get_batch_logps(average_log_prob=True)")


@pytest.mark.points(2)
def test_group_std_is_unbiased_plus_1e_4(tol):
    """Groups of 2 and 3: the unbiased std is sqrt(2) or sqrt(3/2) times the biased one; epsilon 1e-4."""
    rewards = torch.tensor([1.0, 0.0, 0.3, 0.3, 2.0, 0.0, 1.0, 5.0, 5.0, 5.0])
    for size, r in ((2, rewards[:4]), (3, rewards[4:7]), (5, rewards[:10])):
        close(group_advantages(r, size), trl_group_advantages(r, size), tol("loss vs TRL"),
              f"group_advantages({r.tolist()}, group_size={size}) (std: unbiased, + 1e-4; an all-equal group gives 0)")
    tiny = torch.tensor([0.0, 1e-4])  # std ~ 7e-5: the epsilon is not negligible
    close(group_advantages(tiny, 2), trl_group_advantages(tiny, 2), tol("loss vs TRL"),
          "group_advantages([0, 1e-4], 2): std 7.07e-5 plus epsilon 1e-4")


@pytest.mark.points(1)
@pytest.mark.parametrize("scale", ["batch", "none"])
def test_group_advantages_other_scalings_match_trl(scale, tol):
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.2, 0.9])
    close(group_advantages(rewards, 3, scale), trl_group_advantages(rewards, 3, scale), tol("loss vs TRL"),
          f"group_advantages({rewards.tolist()}, 3, scale={scale!r})")


CASES = [(loss_type, beta) for loss_type in ("grpo", "bnpo", "dr_grpo", "dapo") for beta in (0.0, 0.1)]


@pytest.mark.points(1)
@pytest.mark.parametrize("loss_type,beta", CASES)
def test_grpo_loss_on_uneven_lengths_matches_trl(loss_type, beta, tol):
    """Lengths 1..12 in one batch: per-token and per-sequence averages differ a lot here."""
    logps, old, ref, mask, lengths = policy_batch(12, 6, 12)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0])
    config = {"loss_type": loss_type, "beta": beta, "max_completion_length": 16, "epsilon_low": 0.2, "epsilon_high": 0.28}
    got, got_grad = grpo_run(logps, old, ref, adv, mask, config)
    want, want_grad = trl_grpo_loss(logps, old, ref, adv, mask, **config)
    case = f"{config}, completion lengths {lengths.tolist()}"
    close(got, want, tol("loss vs TRL"), f"grpo_loss, {case}")
    close(got_grad, want_grad, tol("gradient vs TRL"), f"d grpo_loss / d logps, {case}")


@pytest.mark.points(2)
def test_dapo_normalises_by_the_whole_batchs_tokens(tol):
    """Two micro-batches with num_items_in_batch = all tokens: their losses add up to bnpo on the whole batch."""
    logps, old, _, mask, lengths = policy_batch(13, 4, 8)
    adv = torch.tensor([0.7, -1.1, 1.3, -0.2])
    total = int(mask.sum())
    parts = [grpo_run(logps[s], old[s], None, adv[s], mask[s], {"loss_type": "dapo"}, total)
             for s in (slice(0, 2), slice(2, 4))]
    want = [trl_grpo_loss(logps[s], old[s], None, adv[s], mask[s], loss_type="dapo", num_items_in_batch=total)
            for s in (slice(0, 2), slice(2, 4))]
    for k, ((got, grad), (w, wg)) in enumerate(zip(parts, want)):
        close(got, w, tol("loss vs TRL"), f"dapo micro-batch {k}, num_items_in_batch {total}, lengths {lengths.tolist()}")
        close(grad, wg, tol("gradient vs TRL"), f"d dapo loss / d logps, micro-batch {k}")
    whole, _ = trl_grpo_loss(logps, old, None, adv, mask, loss_type="bnpo")
    close(parts[0][0] + parts[1][0], whole, tol("loss vs TRL"), "sum of the two dapo micro-batch losses vs bnpo on the whole batch")


@pytest.mark.points(1)
def test_default_config_is_trls_default():
    config = GRPOConfig()
    assert (config.loss_type, config.beta, config.epsilon_low, config.epsilon_high) == ("dapo", 0.0, 0.2, 0.2), (
        f"GRPOConfig() = {config}: TRL 1.16's defaults are loss_type 'dapo', beta 0.0, epsilon 0.2 both sides")


@pytest.mark.points(1)
def test_bad_grpo_config_is_refused():
    for bad in ({"loss_type": "sum"}, {"loss_type": "dr_grpo"}, {"epsilon_low": 0.0}, {"beta": -0.1}):
        with pytest.raises(ValueError):
            GRPOConfig(**bad)
    GRPOConfig(loss_type="dr_grpo", max_completion_length=8)  # the valid case is accepted


@pytest.mark.points(2)
def test_on_policy_grpo_gradient_matches_trl_for_every_loss_type(tol):
    logps, _, _, mask, lengths = policy_batch(14, 4, 6)
    adv = torch.tensor([1.0, -1.0, 0.4, -0.4])
    for loss_type in ("grpo", "bnpo", "dr_grpo", "dapo"):
        config = {"loss_type": loss_type, "max_completion_length": 6}
        got, got_grad = grpo_run(logps, logps.clone(), None, adv, mask, config)
        want, want_grad = trl_grpo_loss(logps, logps.clone(), None, adv, mask, **config)
        close(got, want, tol("loss vs TRL"), f"on-policy grpo_loss, {config}, lengths {lengths.tolist()}")
        close(got_grad, want_grad, tol("gradient vs TRL"), f"on-policy gradient, {config}, lengths {lengths.tolist()}")
        assert float(got_grad.abs().max()) > 0, f"{loss_type}: the on-policy gradient vanished"


@pytest.mark.points(2)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_ppo_clips_on_the_side_the_advantage_sign_picks(sign, tol):
    """Ratios 0.5, 0.9, 1.0, 1.1, 2.0 with A > 0 (clip above 1 + eps) and A < 0 (clip below 1 - eps):
    the clipped tokens have zero gradient, the others -A * ratio / N."""
    old = torch.zeros(1, 5)
    logps = torch.log(torch.tensor([[0.5, 0.9, 1.0, 1.1, 2.0]]))
    adv, mask = torch.full((1, 5), sign), torch.ones(1, 5)
    got, got_grad = ppo_policy_run(logps, old, adv, mask, 0.2)
    want, want_grad = trl_grpo_loss(logps, old, None, adv, mask, loss_type="bnpo")
    case = f"ppo_policy_loss, ratios [0.5, 0.9, 1.0, 1.1, 2.0], advantages all {sign:+g}, clip_eps 0.2"
    close(got, want, tol("loss vs TRL"), case)
    close(got_grad, want_grad, tol("gradient vs TRL"), f"gradient of {case} (0 exactly where clipped)")


@pytest.mark.points(2)
def test_dpo_uses_the_reference_log_ratios(tol):
    """Policy log-probs equal, references differ: DPO's loss comes from the reference alone here."""
    chosen, rejected = torch.tensor([-30.0, -12.0, -7.5]), torch.tensor([-30.0, -12.0, -7.5])
    ref_c, ref_r = torch.tensor([-25.0, -14.0, -7.0]), torch.tensor([-33.0, -11.0, -9.5])
    got, gc, gr, rc, rr = dpo_run(chosen, rejected, ref_c, ref_r, 0.5)
    want, wc, wr, want_rc, want_rr = trl_dpo_loss(chosen, rejected, ref_c, ref_r, 0.5)
    close(got, want, tol("loss vs TRL"), "dpo_loss with equal policy log-probs and different references, beta 0.5")
    close(torch.stack([gc, gr]), torch.stack([wc, wr]), tol("gradient vs TRL"), "d dpo_loss / d (chosen, rejected)")
    close(rc.mean(), torch.tensor(want_rc), tol("loss vs TRL"), "mean chosen reward beta * (chosen - ref_chosen)")
    close(rr.mean(), torch.tensor(want_rr), tol("loss vs TRL"), "mean rejected reward beta * (rejected - ref_rejected)")


@pytest.mark.points(1)
def test_simpo_margin_and_beta_match_trl(tol):
    chosen, rejected = torch.tensor([-0.9, -2.5, -1.0, -1.2]), torch.tensor([-1.6, -1.0, -1.0, -3.0])
    for beta, gamma in ((2.5, 1.4), (10.0, 0.0)):
        got, gc, gr = simpo_run(chosen, rejected, beta, gamma)
        want, wc, wr = trl_simpo_loss(chosen, rejected, beta, gamma)
        close(got, want, tol("loss vs TRL"), f"simpo_loss, beta {beta}, gamma {gamma}")
        close(torch.stack([gc, gr]), torch.stack([wc, wr]), tol("gradient vs TRL"), f"simpo gradient, beta {beta}, gamma {gamma}")


@pytest.mark.points(1)
def test_masked_mean_over_a_single_token_is_that_token():
    """One token under the mask: the mean divides by 1 (the count of tokens where mask is 1)."""
    x = torch.tensor([[3.0, 5.0], [7.0, 11.0]])
    got = float(masked_mean(x, torch.tensor([[0.0, 1.0], [0.0, 0.0]])))
    assert got == 5.0, f"masked_mean of [[3, 5], [7, 11]] with only the 5 unmasked: {got}, expected 5.0"
