"""Shared fixtures: tiny Hugging Face LLaMA models with random weights, saved as HF folders.

The HF model is the oracle: tests load the saved folder with `transformer.load_model` and compare
against the in-memory HF model (fp32, CPU, eager attention). Code that uses HF's classes runs
inside `oracle()`: the grader forbids them to the student's package while a test runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

try:
    from autograder.testing import oracle, tolerances  # oracle: lifts forbidden-API patches for its own code
except ImportError:  # plain pytest outside the course engine
    from contextlib import nullcontext as oracle

    tolerances = None

# Tiny shapes: one thread is faster than two, and immune to a busy grading machine.
torch.set_num_threads(1)

TINY = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=160,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    rope_theta=10000.0,
    rms_norm_eps=1e-6,
    max_position_embeddings=512,
)


def hf_config(**overrides: Any) -> Any:
    """An HF LlamaConfig from TINY + overrides (`rope_theta` works on transformers 4 and 5)."""
    from transformers import LlamaConfig

    kwargs = {**TINY, **overrides}
    theta = kwargs.pop("rope_theta")
    if hasattr(LlamaConfig(), "rope_parameters"):  # transformers 5
        kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    else:
        kwargs["rope_theta"] = theta
    # No special tokens: generation must never stop early unless a test asks for it.
    kwargs.setdefault("bos_token_id", None)
    kwargs.setdefault("eos_token_id", None)
    kwargs.setdefault("pad_token_id", None)
    return LlamaConfig(**kwargs)


def randomize_(model: torch.nn.Module, seed: int) -> None:
    """Weights that make every part matter: norm gains in [0.5, 1.5] (not all ones), linear
    weights N(0, 1/fan_in) so attention scores are O(1) (neither uniform nor one-hot)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)


@pytest.fixture(scope="session")
def tol() -> Callable[[str], dict[str, float]]:
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    if tolerances is None:
        pytest.skip("the numeric answers are graded by the course engine only")
    return tolerances(Path(__file__).parent)


@pytest.fixture(name="hf_config")
def hf_config_fixture() -> Callable[..., Any]:
    """hf_config(**overrides) -> an HF LlamaConfig from TINY + overrides."""
    return hf_config


@pytest.fixture
def make_hf_llama(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., tuple[Any, Path]]:
    """build(seed=0, **config_overrides) -> (HF LlamaForCausalLM in eval mode, saved folder)."""

    def build(seed: int = 0, **overrides: Any) -> tuple[Any, Path]:
        with oracle():  # HF's model classes are forbidden to the student's code, not to the oracle
            from transformers import LlamaForCausalLM
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            torch.manual_seed(seed)
            model = LlamaForCausalLM._from_config(hf_config(**overrides), attn_implementation="eager")
            randomize_(model, seed)
            model = model.float().eval()
            folder = tmp_path_factory.mktemp("hf_llama")
            model.save_pretrained(folder)  # config.json + model.safetensors
        return model, folder

    return build


@pytest.fixture
def hf_logits() -> Callable[..., torch.Tensor]:
    """logits(hf_model, ids, attention_mask=None) -> (B, T, V): HF's full forward, no cache."""

    def run(model: Any, ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        with torch.no_grad(), oracle():
            return model(input_ids=ids, attention_mask=attention_mask, use_cache=False).logits

    return run


@pytest.fixture
def hf_greedy() -> Callable[..., torch.Tensor]:
    """greedy(hf_model, ids, n, attention_mask=None, **generate_kwargs) -> (B, S + n) tokens."""

    def run(
        model: Any, ids: torch.Tensor, n: int, attention_mask: torch.Tensor | None = None, **kw: Any
    ) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(ids)
        kw.setdefault("pad_token_id", 0)
        with torch.no_grad(), oracle():
            return model.generate(ids, attention_mask=attention_mask, max_new_tokens=n, do_sample=False, **kw)

    return run


# ---- exact sampling distributions (float64, plain Python: independent of torch's kernels) -------


def exact_probs(
    logits: list[float], *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0
) -> list[float]:
    """The distribution the sampling pipeline must produce for one row, computed from definitions:
    divide by the temperature; keep the top_k largest; of those, keep tokens (most likely first)
    while the mass already kept is < top_p; of those, keep tokens with p >= min_p * p_max;
    renormalise over the kept set."""
    import math

    z = [x / temperature for x in logits]

    def probs(keep: set[int]) -> dict[int, float]:
        m = max(z[i] for i in keep)
        e = {i: math.exp(z[i] - m) for i in keep}
        total = sum(e.values())
        return {i: e[i] / total for i in keep}

    keep = set(range(len(z)))
    if top_k > 0:
        keep = set(sorted(keep, key=lambda i: -z[i])[:top_k])
    if top_p < 1.0:
        p, mass, nucleus = probs(keep), 0.0, set()
        for i in sorted(keep, key=lambda i: -z[i]):
            if mass >= top_p:
                break
            nucleus.add(i)
            mass += p[i]
        keep = nucleus
    if min_p > 0.0:
        p = probs(keep)
        keep = {i for i in keep if p[i] >= min_p * max(p.values())}
    p = probs(keep)
    return [p.get(i, 0.0) for i in range(len(z))]


def exact_repetition_penalty(logits: list[float], prev: list[int], penalty: float) -> list[float]:
    """CTRL's rule: a seen token's logit is divided by penalty if > 0, else multiplied; once."""
    out = list(logits)
    for i in set(prev):
        out[i] = out[i] / penalty if out[i] > 0 else out[i] * penalty
    return out


def chi_square_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> tuple[float, float, int]:
    """Pearson's chi-square of observed `counts` against `probs` (tokens with probability 0 are
    left out; the caller checks they were never drawn). Returns (statistic, p-value, dof); the
    p-value is the chi-square survival function Q(dof/2, stat/2) (regularised upper gamma)."""
    n = counts.sum().double()
    support = probs > 0
    expected = probs.double()[support] * n
    stat = ((counts.double()[support] - expected) ** 2 / expected).sum()
    dof = int(support.sum()) - 1
    pvalue = torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64), stat / 2)
    return float(stat), float(pvalue), dof


@pytest.fixture
def exact() -> Any:
    """The exact-distribution oracles above, as attributes."""
    from types import SimpleNamespace

    return SimpleNamespace(
        probs=exact_probs, repetition_penalty=exact_repetition_penalty, chi_square=chi_square_pvalue
    )
