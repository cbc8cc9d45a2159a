"""to_probs, residual, accept and verify against definitions written here: the processed
distributions, the threshold of each acceptance, and the exact output distribution of a round
(enumerated over the drafts and the acceptance events: it must be the target's)."""

import pytest
import torch
from conftest import probs_oracle, round_distribution, rows, to_probs_in_worker
from specdec import accept, residual, verify


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 1.0), (1.3, 0.8), (0.5, 0.9)],
                         ids=["T1", "T0.7", "T1.3-top0.8", "T0.5-top0.9"])
def test_to_probs_applies_temperature_then_top_p(tol, temperature, top_p):
    logits = torch.randn(5, 300, generator=torch.Generator().manual_seed(1)) * 3
    got = to_probs_in_worker(logits, temperature, top_p)
    assert got.dtype == torch.float32 and got.shape == (5, 300)
    torch.testing.assert_close(got, probs_oracle(logits, temperature, top_p), **tol("probabilities"))


def test_to_probs_is_one_hot_at_temperature_zero(tol):
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(to_probs_in_worker(logits, 0.0, 1.0), probs_oracle(logits, 0.0), **tol("exact"))


def test_residual_is_the_normalised_positive_part(tol):
    p, q = rows(3, 4, 20), rows(4, 4, 20)
    direct = (p - q).clamp(min=0)
    torch.testing.assert_close(residual(p, q), direct / direct.sum(-1, keepdim=True), **tol("probabilities"))


def test_residual_of_equal_rows_is_the_target_row(tol):
    p = rows(5, 1, 10)[0]
    got = residual(p, p.clone())
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, p, **tol("probabilities"))


def threshold_case():
    """Two drafts (each its q row's argmax) whose p/q lie strictly inside (0, 1), the second below the first."""
    q, p = rows(6, 2, 8), rows(7, 3, 8)
    x = torch.tensor([int(q[0].argmax()), int(q[1].argmax())])
    ratio = [float(p[i, x[i]] / q[i, x[i]]) for i in range(2)]
    assert 1e-3 < ratio[1] < ratio[0] < 0.99, ratio  # the data, not your code
    return x, q, p, ratio


def test_accept_thresholds_at_p_over_q():
    x, q, p, ratio = threshold_case()
    n, _ = accept(x, q, p, torch.tensor([r - 1e-4 for r in ratio]))
    assert n == 2, f"uniforms just under p/q = {ratio} must accept both drafts, accepted {n}"
    n, _ = accept(x, q, p, torch.tensor([ratio[0] - 1e-4, ratio[1] + 1e-4]))
    assert n == 1, f"a uniform just above p/q = {ratio[1]:.4f} must reject the second draft, accepted {n}"
    n, _ = accept(x, q, p, torch.tensor([ratio[0] + 1e-4, 0.0]))
    assert n == 0, f"a uniform just above p/q = {ratio[0]:.4f} must reject the first draft, accepted {n}"


def norm_positive_part(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The residual written here (the oracle): norm(max(0, p - q)) of one row."""
    d = (p.double() - q.double()).clamp(min=0)
    return (d / d.sum()).float()


@pytest.mark.parametrize("rejected", [0, 1])
def test_accept_draws_the_correction_from_the_residual(tol, rejected):
    x, q, p, ratio = threshold_case()
    uniforms = torch.tensor([ratio[0] + 1e-4, 0.0] if rejected == 0 else [ratio[0] - 1e-4, ratio[1] + 1e-4])
    n, dist = accept(x, q, p, uniforms)
    assert n == rejected, f"draft {rejected} must be rejected (see test_accept_thresholds_at_p_over_q), accepted {n}"
    want = norm_positive_part(p[n], q[n])
    torch.testing.assert_close(dist.float(), want, **tol("probabilities"), msg=lambda m: (
        f"after rejecting draft {n}, accept must return residual(p[{n}], q[{n}]) = norm(max(0, p[{n}] - q[{n}])):\n"
        f"  expected {[round(v, 5) for v in want.tolist()]}\n  got      {[round(v, 5) for v in dist.float().tolist()]}\n"
        f"(if a test_residual_* test fails too, fix residual first: this is its output)\n{m}"))


def test_accept_returns_the_targets_last_row_when_every_draft_passes():
    x, q, p, ratio = threshold_case()
    n, dist = accept(x, q, p, torch.tensor([r - 1e-4 for r in ratio]))
    assert n == 2, f"uniforms just under p/q = {ratio} must accept both drafts, accepted {n}"
    torch.testing.assert_close(dist.float(), p[2], msg=lambda m: f"every draft accepted: the bonus token comes from "
                               f"p[gamma] = p[2], the target's row after the last draft. {m}")


@pytest.mark.parametrize("g", [1, 2])
def test_a_round_emits_exactly_the_targets_distribution(g):
    v = 4
    q, p = rows(10 + g, g, v, sharp=1.5), rows(20 + g, g + 1, v, sharp=1.5)
    dist = round_distribution(q, p, g, accept)
    # The first token is distributed as p[0]; a round of k tokens continues as p[1], ... (rows are
    # fixed per position here), so P(tokens = (t0, .., tk-1)) summed over longer rounds is prod p[i][ti].
    first = torch.zeros(v, dtype=torch.float64)
    for key, w in dist.items():
        first[key[0]] += w
    torch.testing.assert_close(first, p[0].double(), rtol=0, atol=1e-6)
    if g == 2:
        pairs = torch.zeros(v, v, dtype=torch.float64)
        for key, w in dist.items():
            if len(key) >= 2:
                pairs[key[0], key[1]] += w
        # P(the round reaches a second token and the pair is (a, b)) = p0(a) * accepted-mass ... the
        # conditional of the second token given the first was an accepted draft a must be p[1]
        reached = [a for a in range(v) if pairs[a].sum() > 1e-9]
        assert len(reached) >= 2, "the data must let several first drafts be accepted"
        for a in reached:
            torch.testing.assert_close(pairs[a] / pairs[a].sum(), p[1].double(), rtol=0, atol=1e-6)


def test_verify_draws_uniforms_then_one_token(tol):
    q, p = rows(30, 3, 12), rows(31, 4, 12)
    drafts = torch.multinomial(q, 1, generator=torch.Generator().manual_seed(32)).squeeze(1)
    ratios = p[torch.arange(3), drafts] / q[torch.arange(3), drafts]
    for seed in range(20):
        got = verify(drafts, q, p, torch.Generator().manual_seed(seed))
        gen = torch.Generator().manual_seed(seed)
        u = torch.rand(3, generator=gen)
        n = 0
        while n < 3 and float(u[n]) * float(q[n, drafts[n]]) < float(p[n, drafts[n]]):
            n += 1
        nxt = p[3] if n == 3 else (p[n] - q[n]).clamp(min=0)
        token = int(torch.multinomial(nxt / nxt.sum(), 1, generator=gen))
        want = tuple(drafts[:n].tolist()) + (token,)
        assert got.num_accepted == n and got.tokens == want, (
            f"got {got.num_accepted} accepted and tokens {got.tokens}, expected {n} and {want}: "
            f"verify(drafts={drafts.tolist()}, q = rows(30, 3, 12), p = rows(31, 4, 12), "
            f"generator=torch.Generator().manual_seed({seed})), whose torch.rand(3) gives the uniforms "
            f"{[round(v, 4) for v in u.tolist()]} against p/q = {[round(v, 4) for v in ratios.tolist()]}, "
            f"then one torch.multinomial from {'p[3] (the bonus)' if n == 3 else f'residual(p[{n}], q[{n}])'}")


def test_verify_with_one_hot_rows_is_greedy():
    v = 10
    target_argmax, draft_argmax = [3, 5, 7, 2], [3, 5, 1]
    p = torch.nn.functional.one_hot(torch.tensor(target_argmax), v).float()
    q = torch.nn.functional.one_hot(torch.tensor(draft_argmax), v).float()
    got = verify(torch.tensor(draft_argmax), q, p, torch.Generator().manual_seed(0))
    assert got.num_accepted == 2 and got.tokens == (3, 5, 7), (
        f"one-hot rows, target argmaxes {target_argmax}, drafts {draft_argmax}: expected 2 accepted and tokens "
        f"(3, 5, 7) (the third draft differs: the target's 7 replaces it), got {got.num_accepted} and {got.tokens}")
    q_all = torch.nn.functional.one_hot(torch.tensor(target_argmax[:3]), v).float()
    got = verify(torch.tensor(target_argmax[:3]), q_all, p, torch.Generator().manual_seed(0))
    assert got.num_accepted == 3 and got.tokens == (3, 5, 7, 2), "every draft accepted: the bonus token follows"


def test_verify_refuses_mismatched_shapes():
    with pytest.raises(ValueError):
        verify(torch.tensor([1, 2]), rows(0, 2, 5), rows(1, 2, 5))
    got = verify(torch.tensor([1, 2]), rows(0, 2, 5), rows(1, 3, 5), torch.Generator().manual_seed(0))
    assert len(got.tokens) == got.num_accepted + 1, "matching shapes (gamma drafts, gamma + 1 target rows) must verify"
