"""Top-k with ties at the k-th value: every token whose logit equals the k-th largest is kept, so
more than k tokens may remain. Oracle: the kept set and its softmax computed here, exactly, from
the logits as Python floats (no sort: a token is kept iff fewer than k logits exceed it)."""

import math

import pytest
import torch
from minivllm import SamplingParams, sample, sampling_probs

from autograder.testing import in_worker


def kept_by_top_k(row: list[float], k: int) -> set[int]:
    """Tokens with fewer than k strictly larger logits: exactly those >= the k-th largest value."""
    if k < 1 or k >= len(row):
        return set(range(len(row)))
    return {i for i, z in enumerate(row) if sum(1 for y in row if y > z) < k}


def top_k_oracle(row: list[float], temperature: float, k: int) -> list[float]:
    """Exact top-k distribution (top_p = 1): softmax of logit / temperature over the kept set."""
    z = [x / temperature for x in row]
    keep = kept_by_top_k(z, k)
    top = max(z[i] for i in keep)
    weights = [math.exp(z[i] - top) if i in keep else 0.0 for i in range(len(z))]
    total = sum(weights)
    return [w / total for w in weights]


# (logits, temperature, top_k): each row ties at its k-th value except the control row
TIED_ROWS = [
    ([3.0, 2.0, 1.0, 1.0, 1.0, 0.5, -1.0, 1.0], 1.0, 3),  # k-th = 1.0, held by 4 tokens: 6 kept
    ([3.0, 2.0, 1.0, 1.0, 1.0, 0.5, -1.0, 1.0], 1.0, 2),  # control: no tie at the k-th value
    ([0.25] * 8, 1.0, 1),  # all tied: top-1 keeps them all (uniform)
    ([1.5, 1.5, 1.5, 1.5, 1.5, 0.0, 2.0, -0.5], 0.5, 4),  # temperature keeps the tie: 6 kept
    ([-2.0, 4.0, -2.0, 4.0, -2.0, 4.0, -2.0, -3.0], 1.3, 2),  # three tied maxima, k = 2
]


@pytest.mark.points(2)
def test_top_k_keeps_every_token_tied_with_the_kth_value():
    logits = torch.tensor([row for row, _, _ in TIED_ROWS])
    params = [SamplingParams(temperature=t, top_k=k) for _, t, k in TIED_ROWS]
    probs = sampling_probs(logits, params)
    assert probs.shape == logits.shape
    for r, (row, t, k) in enumerate(TIED_ROWS):
        expected = torch.tensor(top_k_oracle(row, t, k))
        support = {i for i, p in enumerate(probs[r].tolist()) if p > 0}
        assert support == kept_by_top_k([x / t for x in row], k), f"row {r}: kept {sorted(support)}"
        torch.testing.assert_close(probs[r], expected, atol=1e-6, rtol=1e-5)


@pytest.mark.points(1)
def test_top_k_ties_on_quantised_logits_match_the_exact_distribution():
    g = torch.Generator().manual_seed(31)
    logits = torch.randint(-4, 5, (6, 48), generator=g).float() * 0.5  # 17 values over 48 tokens
    ks = [1, 3, 5, 8, 13, 30]
    params = [SamplingParams(temperature=0.8, top_k=k) for k in ks]
    probs = sampling_probs(logits, params)
    for r, k in enumerate(ks):
        row = logits[r].tolist()
        assert len(kept_by_top_k(row, k)) > k, "each row is drawn to tie at its k-th value"
        torch.testing.assert_close(probs[r], torch.tensor(top_k_oracle(row, 0.8, k)), atol=1e-6, rtol=1e-5)


@in_worker
def tied_draws(logits, n, seed, **params):
    """In the worker: `sample` of n copies of one row, all drawing from one generator (a generator
    crosses by state, so the shared one is built here)."""
    gen = torch.Generator().manual_seed(seed)
    return sample(logits.expand(n, logits.shape[-1]), [SamplingParams(**params)] * n, [gen] * n)


@pytest.mark.points(1)
def test_sampling_draws_every_tied_token():
    row = [2.0, 1.0, 1.0, 1.0, 0.0, -1.0]  # top_k = 2: the k-th value 1.0 is shared by tokens 1, 2, 3
    n = 3000
    tokens = tied_draws(torch.tensor([row]), n, 9, temperature=1.0, top_k=2)
    expected = torch.tensor(top_k_oracle(row, 1.0, 2))  # 0.475, then 0.175 for each tied token
    counts = torch.bincount(torch.tensor(tokens), minlength=len(row)).double()
    assert {i for i, c in enumerate(counts.tolist()) if c > 0} == {0, 1, 2, 3}, counts.tolist()
    # total variation of 3000 draws over 4 outcomes: about 0.012 expected, 0.05 is > 4 sigma
    assert 0.5 * (counts / n - expected.double()).abs().sum() < 0.05


@pytest.mark.points(1)
@pytest.mark.parametrize(("top_p", "kept"), [(0.25, 2), (0.5, 4), (0.75, 6)])
def test_top_p_stops_where_the_mass_reaches_p_exactly(top_p, kept):
    """Eight equal logits: each probability is 1/8 and every partial sum is exact in fp32, so the
    mass reaches top_p exactly after `kept` tokens; the nucleus is the smallest set whose mass
    reaches p, so the next token is cut. Oracle: HF's TopPLogitsWarper on the same row."""
    from transformers.generation.logits_process import TopPLogitsWarper

    logits = torch.zeros(1, 8)
    probs = sampling_probs(logits, [SamplingParams(temperature=1.0, top_p=top_p)])[0]
    hf_kept = int(torch.isfinite(TopPLogitsWarper(top_p)(torch.zeros(1, dtype=torch.long), logits.clone())).sum())
    assert hf_kept == kept
    support = [p for p in probs.tolist() if p > 0]
    assert len(support) == kept, f"top_p={top_p} kept {len(support)} of 8 equal tokens (HF keeps {kept})"
    assert all(p == pytest.approx(1 / kept, abs=1e-6) for p in support)  # fp32 softmax: 1e-6


@pytest.mark.points(1)
def test_a_greedy_row_gets_the_temperature_one_distribution():
    """sampling_probs treats a temperature-0 row as temperature 1 (its docstring): the row is greedy
    and never samples, but its probabilities must still be a distribution (no division by zero).
    Oracle: the exact top-k softmax at temperature 1; tolerance 1e-6 (fp32 softmax)."""
    row = [3.0, 2.0, 1.0, 1.0, 1.0, 0.5, -1.0, 1.0]
    probs = sampling_probs(torch.tensor([row, row]), [SamplingParams(temperature=0.0, top_k=3),
                                                     SamplingParams(temperature=1.0, top_k=3)])
    expected = top_k_oracle(row, 1.0, 3)
    for got in probs.tolist():
        assert got == pytest.approx(expected, abs=1e-6)


# --- top_k = 1 is sampled ---------------------------------------------------------------------
# top_k = 1 is a sampled row, not a greedy one: it draws among every token tied at the maximum and
# takes exactly one draw from its generator, so the rows after it (which may share that generator)
# draw what they would have drawn. Oracles: the exact distribution, and a generator in the judge
# advanced by the draws the docstring prescribes (torch.multinomial's consumption depends only on the
# row's length, never on its values).

TIED_MAX = [0.5, 3.0, -1.0, 2.0, 3.0, 3.0, 1.0, -2.0]  # top_k = 1 keeps tokens 1, 4 and 5 (argmax: 1)


@in_worker
def shared_generator_sample(logits, seed, params, tail):
    """In the worker: `sample` with every row drawing from one generator built here (a generator
    crosses by state), then `tail` uniforms from that generator: they tell how many draws it took."""
    gen = torch.Generator().manual_seed(seed)
    tokens = sample(logits, [SamplingParams(**p) for p in params], [gen] * len(params))
    return tokens, torch.rand(tail, generator=gen).tolist()


def uniforms_after_draws(seed: int, draws: int, vocab: int, tail: int) -> list[float]:
    """The judge's generator after `draws` multinomial draws over `vocab` tokens."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(draws):
        torch.multinomial(torch.ones(vocab), 1, generator=gen)
    return torch.rand(tail, generator=gen).tolist()


@pytest.mark.points(1)
def test_top_k_one_samples_uniformly_among_tied_maxima():
    n = 1500
    tokens, _ = shared_generator_sample(torch.tensor([TIED_MAX] * n), 43, [{"temperature": 0.7, "top_k": 1}] * n, 1)
    counts = torch.bincount(torch.tensor(tokens), minlength=len(TIED_MAX)).double()
    assert {i for i, c in enumerate(counts.tolist()) if c > 0} == {1, 4, 5}, (
        f"top_k=1 over logits {TIED_MAX}: drew tokens {counts.tolist()} (counts per token); the three "
        "tokens tied at the maximum (1, 4, 5) each have probability 1/3: top_k=1 is sampled, not argmax")
    # total variation of 1500 draws over 3 equal outcomes: about 0.015 expected, 0.06 is > 4 sigma
    tv = 0.5 * (counts[[1, 4, 5]] / n - 1 / 3).abs().sum().item()
    assert tv < 0.06, f"tied maxima drawn {counts[[1, 4, 5]].tolist()} of {n}: total variation {tv:.3f} from 1/3 each"


@pytest.mark.points(1)
def test_a_top_k_one_row_draws_once_from_its_generator():
    rows = [[0.1, 2.0, -1.0, 0.3, 0.0, 1.0, 0.2, -0.5],  # top_k = 1, no tie: token 1, one draw
            TIED_MAX,                                    # greedy: argmax 1, no draw
            TIED_MAX,                                    # top_k = 1 among ties: one draw
            [0.0] * 8]                                   # plain sampling: one draw
    params = [{"temperature": 1.0, "top_k": 1}, {"temperature": 0.0}, {"temperature": 1.0, "top_k": 1},
              {"temperature": 1.0}]
    tokens, tail = shared_generator_sample(torch.tensor(rows), 7, params, 4)
    assert tokens[:2] == [1, 1], f"rows 0 and 1 must give token 1 (the only token kept, the argmax): {tokens}"
    assert tokens[2] in (1, 4, 5), f"row 2 (top_k=1 over tied maxima 1, 4, 5) gave {tokens[2]}"
    expected = uniforms_after_draws(7, 3, len(TIED_MAX), 4)
    if tail != expected:
        by_count = {d: uniforms_after_draws(7, d, len(TIED_MAX), 4) for d in range(6)}
        took = next((d for d, u in by_count.items() if u == tail), "an unknown number of")
        pytest.fail(f"the shared generator took {took} draws for rows (top_k=1, greedy, top_k=1 tied, "
                    "sampled); expected 3: every non-greedy row draws once with torch.multinomial, "
                    "top_k=1 included, and a greedy row never draws")
