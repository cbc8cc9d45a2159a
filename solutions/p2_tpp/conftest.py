"""Shared by tests/ and hidden/: the tiny LLaMA the CPU tier serves, the HF greedy oracle, prompts,
tolerances, the published model configs, and a counter of the torch.distributed calls a rank makes
(used inside rank functions, which run beside the package).

Counting collectives is a diagnosis, not a proof: it sees calls made through torch.distributed's
Python functions, not a call into torch's internals. What grades a run is the tokens every rank
returns, checked here against HF `generate` on the same weights."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

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


@pytest.fixture(scope="session")
def hf_greedy(tiny_llama):
    """hf_greedy(prompts, n) -> the n greedy tokens HF generate(do_sample=False) gives each prompt
    (one left-padded batch with an attention mask: in fp32 the same tokens as one at a time)."""
    model = tiny_llama[1]

    def run(prompts: list[list[int]], n: int) -> list[list[int]]:
        width = max(map(len, prompts))
        ids = torch.tensor([[0] * (width - len(p)) + list(p) for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        with torch.no_grad(), oracle():
            out = model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False, pad_token_id=0)
        return out[:, width:].tolist()

    return run


def random_prompts(seed: int, lengths: list[int], vocab: int = 256) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


# torch.distributed function -> the kind counted
COUNTED = {"all_reduce": "all_reduce", "all_gather": "all_gather", "all_gather_into_tensor": "all_gather",
           "reduce_scatter": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter", "broadcast": "broadcast",
           "send": "send", "recv": "recv", "isend": "isend", "irecv": "irecv", "barrier": "barrier",
           "batch_isend_irecv": "batch_isend_irecv"}


@contextmanager
def counting_collectives(package: str = "tpp") -> Iterator[Counter]:
    """Within the block, count this process's calls to torch.distributed's collectives and
    point-to-point functions by kind (also through aliases the package's modules hold). A call made
    from inside another counted call (batch_isend_irecv runs isend) is counted once, as the outer."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    counts: Counter = Counter()
    inside = threading.local()
    patches = []
    for name, kind in COUNTED.items():
        original = getattr(dist, name, None)
        if original is None:
            continue

        def counted(*args, _original=original, _kind=kind, **kwargs):
            if getattr(inside, "depth", 0):
                return _original(*args, **kwargs)
            counts[_kind] += 1
            inside.depth = 1
            try:
                return _original(*args, **kwargs)
            finally:
                inside.depth = 0

        # c10d too: dist.P2POp checks its op against c10d's own isend and irecv
        owners = [dist, c10d] + [m for n, m in list(sys.modules.items())
                                 if m is not None and (n == package or n.startswith(package + "."))]
        for owner in owners:
            for attr, value in list(vars(owner).items()):
                if value is original:
                    patches.append((owner, attr, original))
                    setattr(owner, attr, counted)
    try:
        yield counts
    finally:
        for owner, attr, original in reversed(patches):
            setattr(owner, attr, original)


def _config_dir() -> Path | None:
    """datasets/model_configs of the course tree (COURSE_ROOT, the folders above, the grader's)."""
    roots = [Path(os.environ["COURSE_ROOT"])] if os.environ.get("COURSE_ROOT") else []
    roots += list(Path(__file__).resolve().parents) + [Path.cwd(), *Path.cwd().parents]
    try:
        import autograder

        roots.append(Path(autograder.__file__).resolve().parents[1])
    except ImportError:
        pass
    return next((f for r in roots if (f := r / "datasets" / "model_configs").is_dir()), None)


CONFIG_DIR = _config_dir()


def needs_configs(*names: str) -> pytest.MarkDecorator:
    """Not graded here (a skip at setup) when this checkout lacks datasets/model_configs/<name>.json."""
    missing = [n for n in names if CONFIG_DIR is None or not (CONFIG_DIR / f"{n}.json").is_file()]
    return pytest.mark.skipif(bool(missing), reason=f"datasets/model_configs lacks {missing}")


def load_config(name: str) -> dict:
    return json.loads((CONFIG_DIR / f"{name}.json").read_text())


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES
