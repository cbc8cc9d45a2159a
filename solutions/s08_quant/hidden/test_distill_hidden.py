"""Distillation losses, thoroughly: gradcheck, reverse KL's gradient, extreme logits, masks, fp32."""

import pytest
import torch
import torch.nn.functional as F
from quant import cross_entropy, distillation_loss, kd_kl

from autograder.testing import in_worker, oracle


def logits(seed: int, shape=(2, 6, 40), dtype=torch.float64, spread=3.0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen, dtype=dtype) * spread,
            torch.randn(*shape, generator=gen, dtype=dtype) * spread)


def direct_kl(s, t, temperature, direction, mask=None):
    """fp64 oracle from the definition, differentiable in s (run in the judge)."""
    log_q = torch.log_softmax(s / temperature, -1)
    log_p = torch.log_softmax(t / temperature, -1)
    a, b = (log_p, log_q) if direction == "forward" else (log_q, log_p)
    kl = (a.exp() * (a - b)).sum(-1)
    kl = kl.mean() if mask is None else kl[mask].mean()
    return temperature**2 * kl


@in_worker
def gradcheck_kd(s, t, temperature, direction, mask):
    """torch.autograd.gradcheck of kd_kl in the student logits (fp64), beside the package."""

    def loss(z):
        return kd_kl(z, t, temperature, direction, mask)

    return bool(torch.autograd.gradcheck(loss, (s.clone().requires_grad_(True),), eps=1e-6, atol=1e-6))


@in_worker
def grads(s, t, labels, temperature, alpha, direction):
    s, t = s.clone().requires_grad_(True), t.clone().requires_grad_(True)
    distillation_loss(s, t, labels, temperature=temperature, alpha=alpha, direction=direction).backward()
    return s.grad, t.grad


@pytest.mark.points(2)
@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_gradcheck_in_float64(direction):
    s, t = logits(0, shape=(3, 7))
    mask = torch.tensor([True, False, True])
    assert gradcheck_kd(s, t, 2.5, direction, mask)


@pytest.mark.points(2)
@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_mixed_loss_gradient_matches_the_fp64_oracle(tol, direction):
    s, t = logits(1, shape=(2, 5, 30))
    labels = torch.randint(0, 30, (2, 5), generator=torch.Generator().manual_seed(1))
    labels[1, 3:] = -100
    gs, gt = grads(s, t, labels, 1.5, 0.7, direction)
    keep = labels != -100
    s_ref = s.clone().requires_grad_(True)
    with oracle():
        ce = F.cross_entropy(s_ref[keep], labels[keep])
        loss = 0.7 * direct_kl(s_ref, t, 1.5, direction, keep) + 0.3 * ce
        loss.backward()
    torch.testing.assert_close(gs, s_ref.grad, **tol("fp64 loss"))
    assert gt is None


@pytest.mark.points(2)
def test_extreme_logits_stay_finite(tol):
    # spreads of 1e3 underflow softmax in fp64 (exp(-700) = 0): log(softmax) gives -inf, log_softmax does not
    s, t = logits(2, shape=(4, 16), spread=1e3)
    for direction in ("forward", "reverse"):
        out = kd_kl(s, t, 1.0, direction)
        assert torch.isfinite(out)
        torch.testing.assert_close(out, direct_kl(s, t, 1.0, direction), **tol("fp64 loss"))
    log_q, log_p = F.log_softmax(s, -1), F.log_softmax(t, -1)
    with oracle():
        expected = F.kl_div(log_q, log_p, reduction="batchmean", log_target=True)
    torch.testing.assert_close(kd_kl(s, t, 1.0, "forward"), expected, **tol("fp64 loss"))


@pytest.mark.points(1)
@pytest.mark.parametrize("temperature", [0.5, 1.0, 8.0])
def test_reverse_kl_with_a_mask_matches_the_direct_formula(tol, temperature):
    s, t = logits(3)
    mask = torch.rand(2, 6, generator=torch.Generator().manual_seed(3)) > 0.4
    out = kd_kl(s, t, temperature, "reverse", mask)
    torch.testing.assert_close(out, direct_kl(s, t, temperature, "reverse", mask), **tol("fp64 loss"))
    assert not torch.isclose(out, kd_kl(s, t, temperature, "forward", mask))  # not symmetric


@pytest.mark.points(1)
def test_alpha_one_is_pure_kd_and_alpha_zero_pure_cross_entropy(tol):
    s, t = logits(4)
    labels = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(4))
    labels[0, 0] = -100
    keep = labels != -100
    with oracle():
        ce = F.cross_entropy(s.reshape(-1, 40), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(cross_entropy(s, labels), ce, **tol("fp64 loss"))
    torch.testing.assert_close(distillation_loss(s, t, labels, temperature=3.0, alpha=0.0), ce, **tol("fp64 loss"))
    torch.testing.assert_close(distillation_loss(s, t, labels, temperature=3.0, alpha=1.0),
                               direct_kl(s, t, 3.0, "forward", keep), **tol("fp64 loss"))
    torch.testing.assert_close(distillation_loss(s, t, labels, temperature=3.0, alpha=1.0, direction="reverse"),
                               direct_kl(s, t, 3.0, "reverse", keep), **tol("fp64 loss"))


@pytest.mark.points(1)
def test_float32_logits_give_a_float32_loss(tol):
    s, t = logits(5, dtype=torch.float32)
    out = kd_kl(s, t, 2.0, "forward")
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), direct_kl(s.double(), t.double(), 2.0, "forward"), **tol("fp32 loss"))


@pytest.mark.points(1)
def test_invalid_arguments_raise_value_error():
    s, t = logits(6)
    labels = torch.zeros(2, 6, dtype=torch.long)
    # the same tensors with valid arguments give finite losses (a function that always raises earns nothing)
    assert kd_kl(s, t, 1.0, "reverse").isfinite() and distillation_loss(s, t, labels, alpha=1.0).isfinite()
    with pytest.raises(ValueError):
        kd_kl(s, t, 0.0)
    with pytest.raises(ValueError):
        kd_kl(s, t[..., :30], 1.0)
    with pytest.raises(ValueError):
        kd_kl(s, t, 1.0, "sideways")
    with pytest.raises(ValueError):
        distillation_loss(s, t, labels, alpha=1.5)


@pytest.mark.points(1)
def test_identical_distributions_give_zero_loss():
    s, _ = logits(7)
    for direction in ("forward", "reverse"):
        assert abs(float(kd_kl(s, s.clone(), 2.0, direction))) < 1e-12
