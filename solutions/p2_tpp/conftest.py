"""Shared by tests/ and hidden/: the tiny LLaMA the CPU tier serves, the HF greedy oracle, prompts,
tolerances, the published model configs, and a counter of the torch.distributed calls a rank makes
(used inside rank functions, which run beside the package).

Counting collectives is a diagnosis, not a proof: it sees calls made through torch.distributed's
Python functions, not a call into torch's internals. What grades a run is the tokens every rank
returns, checked here against HF `generate` on the same weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autograder.collective_spy import counting_collectives as _counting
from autograder.model_configs import CONFIG_DIR, load_config, needs_configs  # noqa: F401  (tests import them from here)
from autograder.testing import oracle, tolerances

torch.set_num_threads(1)  # tiny matmuls on a shared 2-core machine: threads cost more than they save

# The CPU tier's model: 5 layers (so 2 stages split 3 + 2), 4 query heads over 2 KV heads (TP=4
# replicates each KV head on two ranks, as the course model's 2 KV heads would be), tied embeddings
# (the embedding and the LM head must use the same vocabulary rows on a rank), a vocabulary where a
# wrong row changes the greedy tokens.
TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=5,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
            tie_word_embeddings=True, initializer_range=0.1, bos_token_id=1, eos_token_id=2)
HIDDEN = TINY["hidden_size"]
LAYERS = TINY["num_hidden_layers"]
ENGINE = dict(max_num_seqs=8, max_model_len=128, block_size=16)  # the engine options every rank test uses


def build_llama(path, seed: int = 0, **overrides):
    """Seeded random HF LlamaForCausalLM in fp32, saved with save_pretrained."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**{**TINY, **overrides})).eval()
    model.save_pretrained(str(path))
    model.generation_config.eos_token_id = None  # the oracle never stops early; tests use ignore_eos
    return model


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """(path to the HF folder, the HF model in fp32 on CPU)."""
    path = tmp_path_factory.mktemp("tiny_llama")
    return str(path), build_llama(path)


class HFTokens(list):
    """HF generate's greedy tokens, one list per prompt, and what judges a divergence from them:
    `gap(i, prefix, token)`, how far HF's logit for `token` after prompt i and `prefix` lies below
    its top logit (fp32). Where that is within the "greedy near-tie" tolerance, another machine's
    summation order may pick either token, and the comparison of that prompt ends there."""

    def __init__(self, tokens: list[list[int]], prompts: list[list[int]], model) -> None:
        super().__init__(tokens)
        self.prompts, self._model = prompts, model

    def gap(self, i: int, prefix: list[int], token: int) -> float:
        ids = torch.tensor([list(self.prompts[i]) + list(prefix)])
        with torch.no_grad(), oracle():
            logits = self._model(ids).logits[0, -1]
        return float(logits.max() - logits[token])


@pytest.fixture(scope="session")
def hf_greedy(tiny_llama):
    """hf_greedy(prompts, n) -> HFTokens: the n greedy tokens HF generate(do_sample=False) gives each
    prompt (one left-padded batch with an attention mask: in fp32 the same tokens as one at a time)."""
    model = tiny_llama[1]

    def run(prompts: list[list[int]], n: int) -> HFTokens:
        width = max(map(len, prompts))
        ids = torch.tensor([[0] * (width - len(p)) + list(p) for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        with torch.no_grad(), oracle():
            out = model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False, pad_token_id=0)
        return HFTokens(out[:, width:].tolist(), prompts, model)

    return run


def random_prompts(seed: int, lengths: list[int], vocab: int = 256) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


def counting_collectives(package: str = "tpp", messages: list | None = None):
    """autograder.collective_spy.counting_collectives for this package."""
    return _counting(package, messages)


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES


NEAR_TIE = _TOLERANCES("greedy near-tie")["atol"]
