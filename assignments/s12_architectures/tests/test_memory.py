"""KV bytes per token against what transformers' cache holds, and the MLA figure."""

import pytest
from conftest import SMALL, assert_same_count, hf_cache_numbers_per_token, real, small
from modelmath import from_config, kv_bytes_per_token, max_cached_tokens


@pytest.mark.points(2)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_kv_bytes_per_token_equal_transformers_cache(name):
    cfg = small(name)
    assert_same_count(f"kv_bytes_per_token(dtype_bytes=4) of a small {name} config (expected: transformers' cache)",
                      kv_bytes_per_token(from_config(cfg), 4), 4 * hf_cache_numbers_per_token(cfg))


def test_deepseek_v3_caches_70272_bytes_per_token_in_bf16():
    assert kv_bytes_per_token(from_config(real("deepseek-v3"))) == 61 * (512 + 64) * 2 == 70_272


def test_llama_3_8b_on_80_gb_holds_what_is_left_after_its_weights():
    a = from_config(real("llama-3-8b"))
    left = 80 * 10**9 - 2 * 8_030_261_248
    assert_same_count("max_cached_tokens of LLaMA-3-8B on 80 GB", max_cached_tokens(a, 80 * 10**9),
                      left // (2 * 32 * 8 * 128 * 2))
