"""KV bytes, FLOPs and the memory budget beyond the public cases."""

import math
import re

import pytest
from conftest import hf_cache_numbers_per_token, hf_decode_flops, hf_model, hf_prefill_flops, real, small
from modelmath import decode_flops, from_config, kv_bytes_per_token, max_cached_tokens, param_count, prefill_flops


@pytest.mark.parametrize(("name", "more"), [("deepseek-v3", dict(q_lora_rank=None)),
                                            ("gemma-7b", {}), ("qwen2.5-7b", {})])
def test_kv_bytes_in_fp8_and_fp32_scale_with_the_element_size(name, more):
    cfg = small(name, **more)
    a = from_config(cfg)
    numbers = hf_cache_numbers_per_token(cfg)
    assert (kv_bytes_per_token(a, 1), kv_bytes_per_token(a, 4)) == (numbers, 4 * numbers)


def test_kv_bytes_of_the_real_dense_configs():
    # 2 (K and V) * layers * kv_heads * head_dim * 2 bytes, read off each config
    expected = {"llama-3-70b": 2 * 80 * 8 * 128 * 2, "qwen2.5-7b": 2 * 28 * 4 * 128 * 2,
                "gemma-7b": 2 * 28 * 16 * 256 * 2, "qwen3-8b": 2 * 36 * 8 * 128 * 2}
    assert {n: kv_bytes_per_token(from_config(real(n))) for n in expected} == expected


@pytest.mark.points(2)
@pytest.mark.parametrize(("name", "more"), [
    ("mixtral-8x7b", dict(num_experts_per_tok=1)),
    ("deepseek-v3", dict(q_lora_rank=None)),
    ("deepseek-v3", dict(n_shared_experts=2, num_hidden_layers=4, first_k_dense_replace=2)),
    ("gemma-7b", dict(tie_word_embeddings=False)),
])
def test_decode_flops_of_variants_at_several_contexts(name, more):
    cfg = small(name, **more)
    a, model = from_config(cfg), hf_model(cfg)
    assert [decode_flops(a, c) for c in (1, 4, 13)] == [hf_decode_flops(cfg, c, model) for c in (1, 4, 13)]


@pytest.mark.points(2)
@pytest.mark.parametrize("name", ["mixtral-8x7b", "qwen3-8b", "gemma-7b"])
def test_prefill_flops_of_more_families(name):
    cfg = small(name)
    assert [prefill_flops(from_config(cfg), t) for t in (1, 6, 17)] == [hf_prefill_flops(cfg, t) for t in (1, 6, 17)]


def test_deepseek_prefill_without_q_lora_rank():
    cfg = small("deepseek-v3", q_lora_rank=None)
    assert prefill_flops(from_config(cfg), 11) == hf_prefill_flops(cfg, 11)


def test_the_budget_rounds_the_weights_up_and_the_tokens_down():
    a = from_config(small("llama-3-8b"))
    params, per_token = param_count(a), kv_bytes_per_token(a)
    budget = params + 10 * per_token + per_token - 1  # 1-byte weights: exactly 10 tokens fit, not 11
    assert max_cached_tokens(a, budget, weight_bytes_per_param=1.0) == 10
    # 0.3 byte per weight: a fraction of a byte, rounded up; one byte short of 3 tokens leaves 2
    weights = params * 0.3
    assert weights != int(weights)
    assert max_cached_tokens(a, math.ceil(weights) + 3 * per_token - 1, weight_bytes_per_param=0.3) == 2
    assert max_cached_tokens(a, math.ceil(weights) + 3 * per_token, weight_bytes_per_param=0.3) == 3
    assert max_cached_tokens(a, 10**9, dtype_bytes=1) == (10**9 - 2 * params) // (per_token // 2)


# an integer with thousands separators (commas or underscores) or none: "61,107,412,992", "61_107_412_992"
INTEGER = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)|\d{1,3}(?:_\d{3})+(?!\d)|\d+")


def integers_in(message: str) -> list[int]:
    return [int(m.group().replace(",", "").replace("_", "")) for m in INTEGER.finditer(message)]


def assert_names_the_shortfall(excinfo, shortfall: int) -> None:
    message = str(excinfo.value)
    assert shortfall in integers_in(message), \
        f"the ValueError should name the shortfall, {shortfall:,} bytes, as an integer; its message: {message!r}"


def test_weights_that_do_not_fit_are_refused_with_the_shortfall():
    a = from_config(real("llama-3-70b"))
    shortfall = 2 * 70_553_706_496 - 80 * 10**9
    assert max_cached_tokens(a, 2 * 70_553_706_496) == 0  # weights that just fit leave no room, and no error
    with pytest.raises(ValueError) as excinfo:  # the docstring: the message names the shortfall in bytes
        max_cached_tokens(a, 80 * 10**9)
    assert_names_the_shortfall(excinfo, shortfall)


def test_one_byte_short_of_the_weights_is_refused_and_exactly_the_weights_hold_no_token():
    a = from_config(small("llama-3-8b"))
    weights = 2 * param_count(a)
    with pytest.raises(ValueError) as excinfo:
        max_cached_tokens(a, weights - 1)
    assert_names_the_shortfall(excinfo, 1)
    assert max_cached_tokens(a, weights) == 0, "weights exactly equal to the memory leave 0 tokens, not an error"
