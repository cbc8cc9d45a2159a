"""Samplers against exact distributions computed from their definitions (see conftest.exact_probs).

Distributions are compared as softmax(filtered logits) vs the exact float64 probabilities
(atol 1e-6). Frequencies of many seeded draws are checked with Pearson's chi-square test at
significance 0.001 (e.g. for 4 degrees of freedom: reject when the statistic exceeds 18.47).
"""

from __future__ import annotations

import pytest
import torch

from transformer import (
    GREEDY,
    SamplingParams,
    apply_repetition_penalty,
    min_p_filter,
    process_logits,
    sample,
    top_k_filter,
    top_p_filter,
)

PROB_ATOL = 1e-6
ALPHA = 1e-3


def random_logits(rows: int, vocab: int, seed: int, scale: float = 2.0) -> torch.Tensor:
    return torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed)) * scale


def assert_distribution(filtered: torch.Tensor, expected_rows: list[list[float]]) -> None:
    assert filtered.dtype == torch.float32
    probs = torch.softmax(filtered.double(), dim=-1)
    expected = torch.tensor(expected_rows, dtype=torch.float64)
    torch.testing.assert_close(probs, expected, atol=PROB_ATOL, rtol=0)
    assert torch.equal(torch.isneginf(filtered), expected == 0), "removed tokens must be exactly -inf"


@pytest.mark.points(1)
@pytest.mark.parametrize("k", [1, 3, 9, 20])
def test_top_k_filter_keeps_the_k_most_likely(k, exact):
    logits = random_logits(3, 12, seed=k)
    assert_distribution(top_k_filter(logits, k), [exact.probs(row, top_k=k) for row in logits.tolist()])


@pytest.mark.points(1)
@pytest.mark.parametrize("p", [0.3, 0.6, 0.9])
def test_top_p_filter_matches_exact_nucleus(p, exact):
    logits = random_logits(4, 12, seed=10)
    assert_distribution(top_p_filter(logits, p), [exact.probs(row, top_p=p) for row in logits.tolist()])


@pytest.mark.points(1)
@pytest.mark.parametrize("min_p", [0.05, 0.2, 0.5])
def test_min_p_filter_matches_exact(min_p, exact):
    logits = random_logits(4, 12, seed=20)
    assert_distribution(min_p_filter(logits, min_p), [exact.probs(row, min_p=min_p) for row in logits.tolist()])


@pytest.mark.points(1)
def test_repetition_penalty_divides_positive_and_multiplies_negative_logits(exact):
    logits = random_logits(2, 10, seed=30)
    prev = torch.tensor([[1, 4, 7, 8], [0, 2, 3, 9]])
    out = apply_repetition_penalty(logits, prev, 1.5)
    expected = [exact.repetition_penalty(row, p, 1.5) for row, p in zip(logits.tolist(), prev.tolist())]
    torch.testing.assert_close(out, torch.tensor(expected), atol=1e-6, rtol=1e-6)  # fp32 division


@pytest.mark.points(2)
def test_process_logits_applies_temperature_then_top_k_top_p_min_p(exact):
    logits = random_logits(3, 16, seed=40)
    params = SamplingParams(temperature=0.7, top_k=10, top_p=0.8, min_p=0.05)
    expected = [exact.probs(r, temperature=0.7, top_k=10, top_p=0.8, min_p=0.05) for r in logits.tolist()]
    assert_distribution(process_logits(logits, params), expected)


@pytest.mark.points(2)
@pytest.mark.parametrize(
    "params",
    [SamplingParams(), SamplingParams(temperature=0.7, top_k=5), SamplingParams(temperature=1.3, top_p=0.8)],
    ids=["plain", "temperature+top_k", "temperature+top_p"],
)
def test_sampled_frequencies_pass_chi_square(params, exact):
    logits = random_logits(1, 10, seed=50, scale=1.0)
    row = logits[0].tolist()
    probs = torch.tensor(exact.probs(row, temperature=params.temperature, top_k=params.top_k, top_p=params.top_p))
    draws = 20_000
    gen = torch.Generator().manual_seed(51)
    tokens = sample(logits.expand(draws, -1), params, generator=gen)
    assert tokens.shape == (draws,) and tokens.dtype == torch.int64
    counts = torch.bincount(tokens, minlength=10)
    assert counts[probs == 0].sum() == 0, "a filtered-out token was drawn"
    stat, pvalue, dof = exact.chi_square(counts, probs)
    assert pvalue > ALPHA, f"chi-square {stat:.1f} with {dof} dof: p = {pvalue:.2e} < {ALPHA}"


@pytest.mark.points(1)
def test_same_seed_gives_same_tokens():
    logits = random_logits(64, 50, seed=60)
    params = SamplingParams(temperature=0.9, top_p=0.95)
    first = sample(logits, params, generator=torch.Generator().manual_seed(7))
    torch.manual_seed(12345)  # the global RNG must not matter when a generator is given
    again = sample(logits, params, generator=torch.Generator().manual_seed(7))
    other = sample(logits, params, generator=torch.Generator().manual_seed(8))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


@pytest.mark.points(1)
def test_greedy_picks_the_argmax():
    logits = random_logits(8, 30, seed=70)
    assert torch.equal(sample(logits, GREEDY), logits.argmax(dim=-1))
    prev = logits.argmax(dim=-1, keepdim=True)  # a strong penalty on the current argmax moves it
    penalized = sample(logits, SamplingParams(temperature=0.0, repetition_penalty=1e4), prev_tokens=prev)
    expected = logits.scatter(-1, prev, -1e9).argmax(dim=-1)  # argmaxes are positive: 2nd best wins
    assert torch.equal(penalized, expected)
