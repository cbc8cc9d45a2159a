"""top_k = 1 on a sampled row is top-k, not greedy: the stage-1 pipeline keeps every token tied with
the k-th largest logit, so a row whose maximum is shared keeps the whole tie (uniform over it), and
the draft and target rows of speculative decoding must be the same distributions. Oracle: the
kept set and its softmax, exactly, from the logits as Python floats."""

import math

import pytest
import torch

from autograder.testing import in_worker

ROWS = [
    [0.5, 3.0, -1.0, 2.0, 3.0, 3.0, 1.0, -2.0],   # maximum 3.0 held by tokens 1, 4, 5
    [0.1, 2.0, -1.0, 0.3, 0.0, 1.0, 0.2, -0.5],   # no tie: one-hot at token 1
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],     # all tied: uniform
    [-2.0, 4.0, -2.0, 4.0, 0.0, 1.0, -3.0, 0.0],  # two tied maxima, tokens 1 and 3
]


@in_worker
def to_probs_top_k(logits: torch.Tensor, temperature: float, top_k: int) -> torch.Tensor:
    from specdec import to_probs
    from transformer import SamplingParams

    return to_probs(logits, SamplingParams(temperature=temperature, top_k=top_k))


def top_k_oracle(row: list[float], temperature: float, k: int) -> list[float]:
    """Softmax of logit / temperature over the tokens with fewer than k strictly larger logits."""
    z = [x / temperature for x in row]
    keep = {i for i, x in enumerate(z) if sum(1 for y in z if y > x) < k}
    top = max(z)
    weights = [math.exp(z[i] - top) if i in keep else 0.0 for i in range(len(z))]
    return [w / sum(weights) for w in weights]


@pytest.mark.points(1)
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_top_k_one_keeps_every_token_tied_at_the_maximum(tol, temperature):
    got = to_probs_top_k(torch.tensor(ROWS), temperature, 1)
    expected = torch.tensor([top_k_oracle(r, temperature, 1) for r in ROWS])
    for i, row in enumerate(ROWS):
        support = [j for j, p in enumerate(got[i].tolist()) if p > 0]
        want = [j for j, p in enumerate(expected[i].tolist()) if p > 0]
        assert support == want, (f"to_probs(top_k=1, temperature={temperature}) on logits {row}: nonzero at "
                                 f"{support}, expected {want} (every token tied at the maximum, each 1/{len(want)}): "
                                 "top_k=1 on a sampled row is top-k, not the greedy one-hot")
    torch.testing.assert_close(got, expected, **tol("probabilities"))
