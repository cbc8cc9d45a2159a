"""Decode and prefill FLOPs against torch's FlopCounterMode around transformers' forward."""

import pytest
from conftest import SMALL, assert_same_count, hf_decode_flops, hf_prefill_flops, small
from modelmath import decode_flops, from_config, prefill_flops


@pytest.mark.points(2)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_decode_flops_equal_the_counted_forward(name):
    cfg = small(name)
    assert_same_count(f"decode_flops at context 7 of a small {name} config (FlopCounterMode counts the expected)",
                      decode_flops(from_config(cfg), 7), hf_decode_flops(cfg, 7))


@pytest.mark.points(2)
@pytest.mark.parametrize("name", ["llama-3-8b", "deepseek-v3"])
def test_prefill_flops_count_causal_pairs(name):
    cfg = small(name)
    assert_same_count(f"prefill_flops of 9 tokens of a small {name} config (FlopCounterMode counts the expected)",
                      prefill_flops(from_config(cfg), 9), hf_prefill_flops(cfg, 9))


def test_a_context_or_prompt_below_one_token_is_refused():
    a = from_config(small("llama-3-8b"))
    assert decode_flops(a, 1) > 0 and prefill_flops(a, 1) > 0  # one token is valid
    with pytest.raises(ValueError, match="context"):
        decode_flops(a, 0)
    with pytest.raises(ValueError, match="tokens"):
        prefill_flops(a, 0)
