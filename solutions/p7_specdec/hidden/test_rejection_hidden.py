"""Hidden: three drafts enumerated exactly, zero-probability tokens on either side, batched residual
rows, and the greedy rule when the draft's argmax disagrees at the first position."""

import pytest
import torch
from conftest import round_distribution, rows
from specdec import accept, residual, verify


def test_three_drafts_emit_exactly_the_targets_first_token_and_continuations():
    v, g = 3, 3
    q, p = rows(40, g, v, sharp=1.2), rows(41, g + 1, v, sharp=1.2)
    dist = round_distribution(q, p, g, accept)
    assert abs(sum(dist.values()) - 1) < 1e-6, "a round's outcomes must sum to probability 1"
    for depth in range(g + 1):
        # conditional on the round reaching token `depth` after accepted drafts, it is drawn from p[depth]
        marg = torch.zeros(v, dtype=torch.float64)
        for key, w in dist.items():
            if len(key) > depth:
                marg[key[depth]] += w
        torch.testing.assert_close(marg / marg.sum(), p[depth].double(), rtol=0, atol=1e-6)


def test_a_draft_the_target_never_emits_is_always_rejected():
    q = torch.tensor([[0.5, 0.5, 0.0]])
    p = torch.tensor([[0.0, 0.6, 0.4], [0.2, 0.3, 0.5]])
    n, dist = accept(torch.tensor([0]), q, p, torch.tensor([0.0]))
    assert n == 0, "p(x) = 0: even a uniform of 0 must reject"
    torch.testing.assert_close(dist, torch.tensor([0.0, 0.2, 0.8]) / 1.0, rtol=1e-5, atol=1e-6)


def test_a_draft_with_more_target_mass_is_always_accepted():
    q = torch.tensor([[0.25, 0.75]])
    p = torch.tensor([[0.5, 0.5], [0.9, 0.1]])
    n, dist = accept(torch.tensor([0]), q, p, torch.tensor([0.9999]))
    assert n == 1
    torch.testing.assert_close(dist, p[1])


def test_residual_works_row_by_row():
    p, q = rows(50, 3, 6), rows(51, 3, 6)
    q[1] = p[1]
    got = residual(p, q)
    for i in range(3):
        torch.testing.assert_close(got[i], residual(p[i], q[i]), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(got[1], p[1], rtol=1e-5, atol=1e-6)


def test_greedy_disagreement_at_the_first_draft_gives_the_targets_token():
    v = 6
    p = torch.nn.functional.one_hot(torch.tensor([4, 1, 2]), v).float()
    q = torch.nn.functional.one_hot(torch.tensor([3, 1]), v).float()
    for seed in range(5):
        got = verify(torch.tensor([3, 1]), q, p, torch.Generator().manual_seed(seed))
        assert got.num_accepted == 0 and got.tokens == (4,)


@pytest.mark.parametrize("g", [1, 4])
def test_the_token_count_is_accepted_plus_one(g):
    q, p = rows(60 + g, g, 30, sharp=0.5), rows(70 + g, g + 1, 30, sharp=0.5)
    drafts = torch.multinomial(q, 1, generator=torch.Generator().manual_seed(1)).squeeze(1)
    counts = set()
    for seed in range(40):
        got = verify(drafts, q, p, torch.Generator().manual_seed(seed))
        assert len(got.tokens) == got.num_accepted + 1 and 0 <= got.num_accepted <= g
        assert got.tokens[:got.num_accepted] == tuple(drafts[:got.num_accepted].tolist())
        counts.add(got.num_accepted)
    assert len(counts) > 1, "flat rows: some rounds must accept more than others"
