"""Shared by tests/ and hidden/: TRL 1.16.0 as the oracle of every loss, called in the judge.

TRL computes its losses inside trainer methods that read a handful of attributes of the trainer.
Building a real trainer needs a model, a dataset, reward functions and accelerate's state, none of
which these methods read, so each oracle calls TRL's *unbound* method with a stand-in `self` that
carries exactly the attributes that method reads (named at each call), set as TRL's defaults or as
the test asks. The arithmetic is TRL's own code on the same tensors. Where TRL has no function
(PPO's value loss and GAE left TRL's core in 2025; the group-advantage lines sit inside
`_generate_and_score_completions`), the oracle is written out from the paper in float64 and says so.
"""

from __future__ import annotations

import functools
import os
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from autograder.testing import course_model_dir, in_worker, oracle, tolerances

torch.set_num_threads(1)  # tiny tensors: one thread is fast and immune to a busy machine
TRL_VERSION = "1.16.0"


@pytest.fixture(scope="session")
def tol():
    return tolerances(Path(__file__).parent)


@functools.cache
def trl():
    """TRL's trainers, imported once (about 5 s); the version the tests were written against."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # CPOTrainer lives in trl.experimental
    with oracle():
        import trl as trl_module
        from trl.experimental.cpo.cpo_trainer import CPOTrainer
        from trl.trainer.dpo_trainer import DPOTrainer
        from trl.trainer.grpo_trainer import GRPOTrainer
        from trl.trainer.utils import nanstd
    assert trl_module.__version__ == TRL_VERSION, f"the oracle is TRL {TRL_VERSION}, found {trl_module.__version__}"
    return SimpleNamespace(GRPOTrainer=GRPOTrainer, DPOTrainer=DPOTrainer, CPOTrainer=CPOTrainer, nanstd=nanstd)


def _accelerator() -> SimpleNamespace:
    """One process: gather and reduce are the identity (what accelerate does at world size 1)."""
    same = lambda x, **_: x  # noqa: E731
    return SimpleNamespace(device=torch.device("cpu"), num_processes=1, gather=same, reduce=same,
                           gather_for_metrics=same)


def trl_grpo_loss(logps, old_logps, ref_logps, advantages, mask, *, loss_type="dapo", beta=0.0,
                  epsilon_low=0.2, epsilon_high=0.2, max_completion_length=None, num_items_in_batch=None):
    """(loss, d loss / d logps) from GRPOTrainer._compute_loss on these per-token log-probs.
    advantages: (B,) as GRPO has them, or (B, T) per token (TRL accepts both: PPO's shape)."""
    t = trl()
    leaf = logps.detach().clone().double().requires_grad_(True)
    me = SimpleNamespace(  # the attributes _compute_loss reads (TRL 1.16.0, grpo_trainer.py)
        _get_per_token_logps_and_entropies=lambda *a, **k: (leaf, torch.zeros_like(leaf), None),
        top_entropy_quantile=1.0, off_policy_mask_threshold=None, importance_sampling_level="token",
        beta=beta, loss_type=loss_type, epsilon_low=epsilon_low, epsilon_high=epsilon_high,
        args=SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=1),
        use_vllm=False, vllm_importance_sampling_correction=False, model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1, max_completion_length=max_completion_length,
        accelerator=_accelerator(), _entropy_bonus_enabled=False, aux_loss_enabled=False,
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)})
    b, n = mask.shape
    inputs = {"prompt_ids": torch.zeros(b, 1, dtype=torch.long), "prompt_mask": torch.ones(b, 1, dtype=torch.long),
              "completion_ids": torch.zeros(b, n, dtype=torch.long), "completion_mask": mask.double(),
              "advantages": advantages.double(), "old_per_token_logps": old_logps.double(),
              "num_items_in_batch": torch.tensor(float(mask.sum() if num_items_in_batch is None else num_items_in_batch))}
    if ref_logps is not None:
        inputs["ref_per_token_logps"] = ref_logps.double()
    with oracle():
        loss = t.GRPOTrainer._compute_loss(me, None, inputs)
        (grad,) = torch.autograd.grad(loss, leaf, allow_unused=True)
    return loss.detach(), torch.zeros_like(leaf) if grad is None else grad


def trl_group_advantages(rewards, group_size, scale="group"):
    """GRPOTrainer._generate_and_score_completions' advantage lines (TRL 1.16.0, "sum_then_normalize"),
    with TRL's own nanstd (unbiased) and its 1e-4: that method also generates, so its lines are
    repeated here verbatim around TRL's helper."""
    t = trl()
    with oracle():
        r = rewards.double()
        mean = r.view(-1, group_size).nanmean(dim=1).repeat_interleave(group_size)
        if scale == "batch":
            std = t.nanstd(r).expand_as(r)
        else:
            std = t.nanstd(r.view(-1, group_size), dim=1).repeat_interleave(group_size)
        adv = r - mean
        return adv if scale == "none" else adv / (std + 1e-4)


def trl_batch_logps(logits, input_ids, prompt_lengths, lengths, average=False):
    """CPOTrainer.get_batch_logps (a staticmethod): labels are input_ids with prompt and padding set
    to -100, as TRL's preference trainers build them. Returns (B,) summed (or averaged) log-probs."""
    t = trl()
    pos = torch.arange(input_ids.shape[1])
    labels = input_ids.masked_fill((pos[None] < prompt_lengths[:, None]) | (pos[None] >= lengths[:, None]), -100)
    with oracle():
        return t.CPOTrainer.get_batch_logps(logits.double(), labels, average_log_prob=average)


def trl_dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta):
    """(loss, d loss / d chosen, d loss / d rejected, mean chosen reward, mean rejected reward) from
    DPOTrainer._compute_loss with loss_type
    "sigmoid" and precomputed reference log-probs. Its model is a stand-in returning the per-token
    log-probs TRL's fused head would: one completion token per sequence carrying the whole sum."""
    t = trl()
    c = chosen.detach().clone().double().requires_grad_(True)
    r = rejected.detach().clone().double().requires_grad_(True)
    b = c.shape[0]
    per_token = torch.stack([torch.cat([c, r]), torch.zeros(2 * b, dtype=torch.float64)], dim=1)  # (2B, 2)
    outputs = SimpleNamespace(log_probs=per_token, entropy=torch.zeros(2 * b, 2, dtype=torch.float64),
                              mean_logits=torch.zeros(2 * b, 2, dtype=torch.float64),
                              is_top1=torch.zeros(2 * b, 2, dtype=torch.bool), aux_loss=None)
    me = SimpleNamespace(  # the attributes _compute_loss reads (TRL 1.16.0, dpo_trainer.py)
        model=SimpleNamespace(training=True), accelerator=_accelerator(), aux_loss_enabled=False, ld_alpha=None,
        precompute_ref_logps=True, f_divergence_type="reverse_kl", loss_types=["sigmoid"], loss_weights=[1.0],
        beta=beta, use_weighting=False, label_smoothing=0.0, _metrics={"train": defaultdict(list)},
        _total_train_tokens=0, _tp_size=1)
    mask = torch.tensor([[1, 1, 0]] * (2 * b))  # shifted: the one completion token of each row
    inputs = {"input_ids": torch.zeros(2 * b, 3, dtype=torch.long), "attention_mask": torch.ones(2 * b, 3, dtype=torch.long),
              "completion_mask": mask, "ref_chosen_logps": ref_chosen.double(), "ref_rejected_logps": ref_rejected.double()}
    with oracle():
        loss = t.DPOTrainer._compute_loss(me, lambda **_: outputs, inputs, False)
        gc, gr = torch.autograd.grad(loss, [c, r])
    logged = me._metrics["train"]
    return loss.detach(), gc, gr, logged["rewards/chosen"][-1], logged["rewards/rejected"][-1]


def trl_simpo_loss(chosen_avg, rejected_avg, beta, gamma):
    """(loss, d/d chosen_avg, d/d rejected_avg) from CPOTrainer.cpo_loss with loss_type "simpo",
    alpha 0 and no label smoothing (SimPO = CPO's simpo loss without its NLL term), averaged as the
    trainer averages it."""
    t = trl()
    c = chosen_avg.detach().clone().double().requires_grad_(True)
    r = rejected_avg.detach().clone().double().requires_grad_(True)
    me = SimpleNamespace(alpha=0.0, loss_type="simpo", simpo_gamma=gamma, beta=beta, label_smoothing=0.0,
                         accelerator=_accelerator())  # the attributes cpo_loss reads
    with oracle():
        losses, _, _ = t.CPOTrainer.cpo_loss(me, c, r)
        loss = losses.mean()
        gc, gr = torch.autograd.grad(loss, [c, r])
    return loss.detach(), gc, gr


# ---- float64 oracles written from the papers (TRL 1.16 has no PPO trainer) ----

def gae_oracle(rewards, values, mask, gamma, lam):
    """Schulman et al. 2016, eq. 16 truncated at each completion's end: a double loop in float64,
    A_t = sum_l (gamma lam)^l delta_{t+l} over the real tokens after t, V = 0 past the last one."""
    r, v, m = rewards.double(), values.double(), mask.double()
    adv = torch.zeros_like(v)
    for b in range(v.shape[0]):
        n = int(m[b].sum())
        vb = torch.cat([v[b, :n], torch.zeros(1, dtype=torch.float64)])
        delta = r[b, :n] + gamma * vb[1:] - vb[:-1]
        for t in range(n):
            adv[b, t] = sum((gamma * lam) ** k * delta[t + k] for k in range(n - t))
    return adv, (adv + v) * m


def value_loss_oracle(values, old_values, returns, mask, clip_eps):
    """(loss, d loss / d values): the clipped value loss of PPO implementations (OpenAI baselines'
    ppo2, TRL's PPOTrainer until its removal): 0.5 * masked mean of max((V-R)^2, (Vclip-R)^2)."""
    v = values.detach().clone().double().requires_grad_(True)
    old, ret, m = old_values.double(), returns.double(), mask.double()
    clipped = old + (v - old).clamp(-clip_eps, clip_eps)
    loss = 0.5 * (torch.maximum((v - ret) ** 2, (clipped - ret) ** 2) * m).sum() / m.sum()
    (grad,) = torch.autograd.grad(loss, v)
    return loss.detach(), grad


# ---- the package, called in the worker with gradients (autograd does not cross processes) ----

def _loss_and_grad(loss, leaves):
    """(loss, gradients) of a scalar loss; a loss that does not depend on a leaf gives zeros there."""
    grads = torch.autograd.grad(loss, leaves, allow_unused=True) if loss.requires_grad else [None] * len(leaves)
    return loss.detach(), [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads)]


@in_worker
def grpo_run(logps, old_logps, ref_logps, advantages, mask, config: dict, num_items_in_batch=None):
    """The student's grpo_loss with GRPOConfig(**config): (loss, d loss / d logps)."""
    from posttrain import GRPOConfig, grpo_loss

    leaf = logps.clone().requires_grad_(True)
    loss = grpo_loss(leaf, old_logps, ref_logps, advantages, mask, GRPOConfig(**config), num_items_in_batch)
    value, (grad,) = _loss_and_grad(loss, [leaf])
    return value, grad


@in_worker
def ppo_policy_run(logps, old_logps, advantages, mask, clip_eps):
    from posttrain import ppo_policy_loss

    leaf = logps.clone().requires_grad_(True)
    value, (grad,) = _loss_and_grad(ppo_policy_loss(leaf, old_logps, advantages, mask, clip_eps), [leaf])
    return value, grad


@in_worker
def ppo_value_run(values, old_values, returns, mask, clip_eps):
    from posttrain import ppo_value_loss

    leaf = values.clone().requires_grad_(True)
    value, (grad,) = _loss_and_grad(ppo_value_loss(leaf, old_values, returns, mask, clip_eps), [leaf])
    return value, grad


@in_worker
def dpo_run(chosen, rejected, ref_chosen, ref_rejected, beta):
    """(loss, d/d chosen, d/d rejected, chosen_rewards, rejected_rewards) of the student's dpo_loss."""
    from posttrain import dpo_loss

    c, r = chosen.clone().requires_grad_(True), rejected.clone().requires_grad_(True)
    loss, chosen_rewards, rejected_rewards = dpo_loss(c, r, ref_chosen, ref_rejected, beta)
    value, (gc, gr) = _loss_and_grad(loss, [c, r])
    return value, gc, gr, chosen_rewards.detach(), rejected_rewards.detach()


@in_worker
def simpo_run(chosen_avg, rejected_avg, beta, gamma):
    from posttrain import simpo_loss

    c, r = chosen_avg.clone().requires_grad_(True), rejected_avg.clone().requires_grad_(True)
    value, (gc, gr) = _loss_and_grad(simpo_loss(c, r, beta, gamma), [c, r])
    return value, gc, gr


def close(got, want, tol, what: str) -> None:
    """assert_close in float64 with a message naming the case, the worst element and both values."""
    got, want = torch.as_tensor(got).double(), torch.as_tensor(want).double()
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    bad = ~torch.isclose(got, want, rtol=tol["rtol"], atol=tol["atol"])
    if bool(bad.any()):
        i = tuple(int(k) for k in bad.nonzero()[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {got.numel()} values differ (rtol {tol['rtol']}, "
                             f"atol {tol['atol']}); at index {i}: got {got[i].item():.8g}, expected "
                             f"{want[i].item():.8g}\n  got      {got.flatten()[:8].tolist()}\n  expected "
                             f"{want.flatten()[:8].tolist()}")


def draft_dir() -> str:
    folder = course_model_dir("course-llama-draft")
    if folder is None:
        pytest.skip("the course models are not built here (datasets/models)")
    return str(folder)


def policy_batch(seed: int, b: int, t: int, min_len: int = 1):
    """logps, old_logps, ref_logps (B, T) near the log-probs of a real policy, a right-padded mask of
    lengths in [min_len, T], and the mask's lengths."""
    g = torch.Generator().manual_seed(seed)
    logps = -torch.rand(b, t, generator=g) * 3
    old = logps + torch.randn(b, t, generator=g) * 0.3       # ratios mostly in [0.5, 2]: some clip, some not
    ref = logps + torch.randn(b, t, generator=g) * 0.2
    lengths = torch.randint(min_len, t + 1, (b,), generator=g)
    lengths[0] = t                                            # one full row, so T is a real length
    mask = (torch.arange(t)[None] < lengths[:, None]).float()
    return logps, old, ref, mask, lengths


# ---- the two-process sync: a rank function (shipped to the ranks by name) ----

def sync_on_rank(folder: str, batch: torch.Tensor, steps: int, lr: float, prompt: list[int], n: int) -> list:
    """Rank 0 trains (SGD on the batch's next-token loss) and sends each version; rank 1 receives
    it and generates. Each rank returns its per-sync records."""
    import torch.distributed as dist

    from posttrain import RolloutWorker, send_weights

    torch.set_num_threads(1)  # the judge's arithmetic: the same weights bit for bit
    if dist.get_rank() == 0:
        from transformers import LlamaForCausalLM

        torch.manual_seed(0)
        model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32)
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        out = []
        for version in range(1, steps + 1):
            model(batch, labels=batch).loss.backward()
            opt.step()
            opt.zero_grad()
            report = send_weights(model, version, dst=1)
            out.append([report.version, report.bytes_moved, report.num_tensors])
        return out
    worker = RolloutWorker(folder)
    out = []
    for version in range(1, steps + 1):
        report = worker.receive_weights(src=0)
        out.append([report.version, report.bytes_moved, report.num_tensors, worker.generate([prompt], n, version)[0]])
    return out


def bad_header_on_rank(folder: str, count: int) -> list:
    """Rank 0 (the test's own code, not the package) sends a header announcing `count` tensors and
    waits for rank 1's verdict; rank 1's receive_weights must refuse it with a ValueError. A receiver
    that accepts the header waits for tensors that never come: the test then times out."""
    import torch.distributed as dist

    from posttrain import RolloutWorker

    if dist.get_rank() == 0:
        dist.send(torch.tensor([1, count], dtype=torch.int64), dst=1)
        verdict = torch.zeros(1, dtype=torch.int64)
        dist.recv(verdict, src=1)
        return [int(verdict)]
    worker = RolloutWorker(folder)
    try:
        worker.receive_weights(src=0)
    except ValueError:
        dist.send(torch.tensor([1], dtype=torch.int64), dst=0)
        return ["refused", worker.version]
    dist.send(torch.tensor([0], dtype=torch.int64), dst=0)
    return ["accepted", worker.version]
