"""Backward pass: dQ, dK, dV through the autograd wrapper against plain attention."""

import pytest
import torch
from autograder.testing import in_worker, oracle

from flashattn import flash_attention


@pytest.mark.points(4)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_backward_matches_reference_fp32(causal, device, qkv_factory, attention_check):
    q, k, v, do = qkv_factory(1, 2, 2, 64, 64, torch.float32, device, seed=10)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)


@pytest.mark.points(2)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_backward_matches_reference_fp16(causal, device, qkv_factory, attention_check):
    q, k, v, do = qkv_factory(1, 2, 2, 48, 32, torch.float16, device, seed=11)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)


@in_worker
def leaf_grads_of_squared_loss(q, k, v):
    """In the worker, beside the package's autograd Function: loss.backward() on the leaves. The
    loss and its own gradient are the test's (oracle); backward() from the output reaches the
    package's backward, and its results the leaves."""
    o = flash_attention(q, k, v, causal=True)
    with oracle():
        do = 2 * o.detach()  # d(o.pow(2).sum())/do
    o.backward(do)
    return q.grad, k.grad, v.grad


@pytest.mark.points(1)
def test_gradients_reach_the_leaves_through_a_loss(device, qkv_factory, attention_oracle):
    # loss.backward() (not autograd.grad), and a loss that is not linear in o.
    q, k, v, _ = qkv_factory(1, 2, 2, 32, 32, torch.float32, device, seed=12)
    grads = leaf_grads_of_squared_loss(q, k, v)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    with oracle():
        attention_oracle(*leaves, causal=True)[0].pow(2).sum().backward()
    assert len(grads) == 3
    for grad, ref in zip(grads, leaves):
        assert grad is not None
        torch.testing.assert_close(grad.double(), ref.grad, rtol=1e-2, atol=1e-2)
