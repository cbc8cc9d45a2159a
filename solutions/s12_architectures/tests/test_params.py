"""Parameter counts against transformers' modules (meta device) and the published sizes."""

import pytest
from autograder.testing import in_worker
from conftest import SMALL, assert_same_count, hf_param_count, real, small
from modelmath import from_config, mtp_params, param_count


@pytest.mark.points(2)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_param_count_equals_the_transformers_model_of_a_small_config(name):
    cfg = small(name)
    assert_same_count(f"param_count of a small {name} config (transformers' model counts the expected)",
                      param_count(from_config(cfg)), hf_param_count(cfg))


def test_llama_3_8b_has_exactly_its_published_count():
    assert_same_count("param_count of LLaMA-3-8B", param_count(from_config(real("llama-3-8b"))), 8_030_261_248)


@pytest.mark.points(2)
def test_mixtral_total_and_active_match_mistral_ai():
    a = from_config(real("mixtral-8x7b"))
    total, active = param_count(a), param_count(a, active=True)  # "46.7B total, 12.9B active" (Mistral AI)
    assert round(total / 1e9, 1) == 46.7, f"Mixtral 8x7B param_count: yours {total:,}, expected 46.7B to 0.1B"
    assert round(active / 1e9, 1) == 12.9, \
        f"Mixtral 8x7B param_count(active=True): yours {active:,}, expected 12.9B to 0.1B"


@pytest.mark.points(2)
def test_deepseek_v3_main_model_and_mtp_match_the_release():
    raw = real("deepseek-v3")
    a = from_config(raw)
    embed = raw["vocab_size"] * raw["hidden_size"]
    total, active, mtp = param_count(a), param_count(a, active=True) - embed, mtp_params(a)
    # README_WEIGHTS.md: 671B main model, 36.6B activated (embedding lookup excluded), 11.5B unique MTP
    assert round(total / 1e9) == 671, f"DeepSeek-V3 param_count: yours {total:,}, expected 671B to 1B"
    assert round(active / 1e9, 1) == 36.6, \
        f"DeepSeek-V3 param_count(active=True) less the embedding: yours {active:,}, expected 36.6B to 0.1B"
    assert abs(mtp - 11.5e9) < 0.15e9, f"DeepSeek-V3 mtp_params: yours {mtp:,}, expected 11.5B within 0.15B"


def test_gemma_7b_and_qwen3_8b_match_their_reports():
    gemma, qwen3 = from_config(real("gemma-7b")), from_config(real("qwen3-8b"))
    # Gemma report, Table 1: 786,432,000 embedding + 7,751,248,896 non-embedding parameters (head tied)
    assert_same_count("param_count of Gemma-7B", param_count(gemma), 786_432_000 + 7_751_248_896)
    # Qwen3-8B model card: 8.2B, 6.95B non-embedding (embedding and head untied)
    embed = 151_936 * 4096
    total = param_count(qwen3)
    assert (round(total / 1e9, 1), round((total - 2 * embed) / 1e9, 2)) == (8.2, 6.95), \
        f"Qwen3-8B param_count: yours {total:,}, expected 8.2B to 0.1B and 6.95B without the two {embed:,} tables"


@in_worker
def _tied_pair_counted_by_the_package() -> tuple[int, int]:
    import torch
    from modelmath import unique_param_count as count

    from autograder.testing import oracle

    with oracle():  # the test's own tensors, built outside the package's accounting
        embed = torch.zeros(6, 4)
        tied = {"embed_tokens.weight": embed, "lm_head.weight": embed, "norm.weight": torch.ones(4)}
        untied = {"embed_tokens.weight": embed, "lm_head.weight": embed.clone(), "norm.weight": torch.ones(4)}
    return count(tied), count(untied)


@pytest.mark.points(1)
def test_a_tied_head_counts_once_and_an_equal_copy_twice():
    # tied: 6*4 shared + 4 = 28; untied: the clone holds equal values in its own storage, 24 + 24 + 4 = 52
    assert _tied_pair_counted_by_the_package() == (28, 52)
