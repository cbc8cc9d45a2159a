"""Distillation losses against torch.nn.functional.kl_div and a direct fp64 computation."""

import pytest
import torch
import torch.nn.functional as F
from quant import distillation_loss, kd_kl

try:
    from autograder.testing import in_worker, oracle
except ImportError:
    from contextlib import nullcontext as oracle

    def in_worker(fn):
        return fn


def logits(seed: int, shape=(3, 5, 50), dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=dtype) * 3, torch.randn(*shape, generator=gen, dtype=dtype) * 3


@pytest.mark.points(2)
@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.0])
def test_forward_and_reverse_kl_match_kl_div_times_t_squared(tol, temperature):
    s, t = logits(0)
    v = s.shape[-1]
    log_q = F.log_softmax(s / temperature, dim=-1).reshape(-1, v)
    log_p = F.log_softmax(t / temperature, dim=-1).reshape(-1, v)
    with oracle():  # kl_div(input, target) = KL(target || input), batchmean = sum / rows
        forward = F.kl_div(log_q, log_p, reduction="batchmean", log_target=True) * temperature**2
        reverse = F.kl_div(log_p, log_q, reduction="batchmean", log_target=True) * temperature**2
    torch.testing.assert_close(kd_kl(s, t, temperature, "forward"), forward, **tol("fp64 loss"))
    torch.testing.assert_close(kd_kl(s, t, temperature, "reverse"), reverse, **tol("fp64 loss"))


@pytest.mark.points(2)
def test_mixed_loss_weights_kd_and_cross_entropy(tol):
    s, t = logits(1)
    labels = torch.randint(0, 50, (3, 5), generator=torch.Generator().manual_seed(1))
    labels[0, :2] = -100  # ignored positions
    keep = labels != -100
    temperature, alpha = 2.0, 0.3
    p = torch.softmax(t / temperature, dim=-1)[keep]
    log_q = torch.log_softmax(s / temperature, dim=-1)[keep]
    kd = temperature**2 * (p * (p.log() - log_q)).sum(-1).mean()  # direct fp64
    ce = -torch.log_softmax(s, dim=-1)[keep].gather(-1, labels[keep].unsqueeze(-1)).mean()
    out = distillation_loss(s, t, labels, temperature=temperature, alpha=alpha)
    torch.testing.assert_close(out, alpha * kd + (1 - alpha) * ce, **tol("fp64 loss"))


@in_worker
def student_grads(s: torch.Tensor, t: torch.Tensor, temperature: float, direction: str):
    """Beside the package: the gradient of kd_kl with respect to the student and the teacher."""
    s, t = s.clone().requires_grad_(True), t.clone().requires_grad_(True)
    loss = kd_kl(s, t, temperature, direction)
    loss.backward()
    return s.grad, t.grad


@pytest.mark.points(2)
def test_forward_kl_gradient_is_t_times_q_minus_p_over_positions(tol):
    s, t = logits(2, shape=(4, 30))
    temperature = 3.0
    gs, gt = student_grads(s, t, temperature, "forward")
    q, p = torch.softmax(s / temperature, -1), torch.softmax(t / temperature, -1)
    # d/ds [T^2 / N sum KL(p || q)] = T (q - p) / N: the T^2 factor restores the 1/T of the softening.
    torch.testing.assert_close(gs, temperature * (q - p) / s.shape[0], **tol("fp64 loss"))
    assert gt is None  # the teacher is not trained
