"""The paper's formulas against direct computations: beta as 1 - total variation, the expected
tokens as the mean of a simulated geometric process's sum, the speedup as tokens over cost."""

import math

import pytest
import torch
from specdec import acceptance_rate, expected_speedup, expected_tokens_from_rates, expected_tokens_per_call


def test_acceptance_rate_is_one_minus_total_variation(tol):
    g = torch.Generator().manual_seed(0)
    p, q = torch.softmax(torch.randn(6, 40, generator=g), -1), torch.softmax(torch.randn(6, 40, generator=g), -1)
    tv = 0.5 * (p.double() - q.double()).abs().sum(-1)
    torch.testing.assert_close(acceptance_rate(p, q).double(), 1 - tv, **tol("probabilities"))


@pytest.mark.parametrize("alpha, gamma", [(0.0, 3), (0.5, 1), (0.656, 4), (0.9, 7), (1.0, 5), (0.3, 0)])
def test_expected_tokens_is_the_truncated_geometric_mean(tol, alpha, gamma):
    # tokens of a round = 1 + (number of leading accepted drafts, at most gamma)
    direct = sum(alpha**k for k in range(gamma + 1))
    assert math.isclose(expected_tokens_per_call(alpha, gamma), direct, rel_tol=tol("formulas")["rtol"])


def test_expected_tokens_from_rates_multiplies_the_rates(tol):
    rates = [0.9, 0.7, 0.5, 0.2]
    direct = 1 + 0.9 + 0.9 * 0.7 + 0.9 * 0.7 * 0.5 + 0.9 * 0.7 * 0.5 * 0.2
    assert math.isclose(expected_tokens_from_rates(rates), direct, rel_tol=tol("formulas")["rtol"])
    assert math.isclose(expected_tokens_from_rates([0.6] * 3), expected_tokens_per_call(0.6, 3),
                        rel_tol=tol("formulas")["rtol"])


def test_expected_speedup_divides_tokens_by_the_round_cost(tol):
    a, g, c = 0.7, 4, 0.05
    assert math.isclose(expected_speedup(a, g, c), (1 - a**5) / ((1 - a) * (g * c + 1)), rel_tol=tol("formulas")["rtol"])
    assert math.isclose(expected_speedup(1.0, 3, 0.0), 4.0, rel_tol=tol("formulas")["rtol"])


@pytest.mark.parametrize("call", [lambda: expected_tokens_per_call(1.2, 3), lambda: expected_tokens_per_call(0.5, -1),
                                  lambda: expected_tokens_from_rates([0.5, -0.1]), lambda: expected_speedup(0.5, 2, -1.0)],
                         ids=["alpha>1", "gamma<0", "rate<0", "c<0"])
def test_out_of_range_inputs_are_refused(call):
    # the edges of each range are valid: a function that refuses everything earns nothing here
    assert expected_tokens_per_call(1.0, 0) == 1 and expected_tokens_from_rates([0.0, 1.0]) == 1
    assert expected_speedup(0.5, 2, 0.0) > 0
    with pytest.raises(ValueError):
        call()
