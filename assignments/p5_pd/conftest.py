"""Shared by tests/ and hidden/: the course model, the HF oracles (in the judge) and the engine sizes.

Every oracle here is HF transformers on the same weights in fp32: its greedy tokens, its KV cache of
a prompt (past_key_values, after RoPE, what a paged pool holds), and its greedy continuation from a
KV cache the test hands it. Greedy tokens are compared up to HF's first near-tie (a top-2 logit gap
under the "greedy near-tie" tolerance, where another machine's summation order may pick either).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch

from autograder.testing import course_model_dir, oracle, tolerances

torch.set_num_threads(1)  # a small model: one thread is fast enough and immune to a busy machine

EOS = 0  # the course model's end of text
# The two sides of every test: different block sizes, so no block maps onto one block of the other.
PREFILL_ENGINE = dict(block_size=16, num_kv_blocks=64, max_model_len=256, dtype="float32", device="cpu")
DECODE_ENGINE = dict(block_size=4, num_kv_blocks=256, max_model_len=256, dtype="float32", device="cpu")
_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES


def model_dir() -> str:
    folder = course_model_dir("course-llama")
    if folder is None:
        pytest.skip("the course model is not built here (datasets/models/course-llama)")
    return str(folder)


def random_prompts(seed: int, lengths: list[int], vocab: int = 8192) -> list[tuple[int, ...]]:
    """Prompts of the given lengths, token ids in [2, vocab) (0 and 1 are EOS and padding)."""
    g = torch.Generator().manual_seed(seed)
    return [tuple(torch.randint(2, vocab, (n,), generator=g).tolist()) for n in lengths]


@functools.cache
def hf_model():
    from transformers import LlamaForCausalLM

    with oracle():
        return LlamaForCausalLM.from_pretrained(model_dir(), dtype=torch.float32).eval()


def _cache_kw(cache) -> dict:
    """The forward's keyword for a KV cache: `cache` since transformers 5.2x, `past_key_values` before."""
    import inspect

    names = inspect.signature(type(hf_model()).forward).parameters
    return {"cache": cache} if "cache" in names else {"past_key_values": cache}


def _cache_of(out):
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _layers_kv(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer of an HF cache, each (1, kv_heads, T, head_dim)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


@functools.cache
def hf_prompt_kv(prompt: tuple[int, ...]) -> torch.Tensor:
    """HF's KV of the prompt: (num_layers, 2, len(prompt), num_kv_heads, head_dim), fp32."""
    with oracle(), torch.no_grad():
        out = hf_model()(torch.tensor([prompt]), use_cache=True)
        kv = torch.stack([torch.stack([k[0], v[0]]) for k, v in _layers_kv(_cache_of(out))])  # (L, 2, H, T, D)
        return kv.permute(0, 1, 3, 2, 4).contiguous()


def hf_continue(kv: torch.Tensor, first_token: int, max_tokens: int, eos: int | None) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """HF's greedy tokens after a context whose KV is `kv` (L, 2, T, H, D) and whose next token is
    first_token: first_token, then up to max_tokens - 1 more (stopping after `eos` unless None), with
    each sampled step's top-2 logit gap (the first token's gap is inf: it is given)."""
    from transformers import DynamicCache

    model = hf_model()
    tokens, gaps = [int(first_token)], [float("inf")]
    with oracle(), torch.no_grad():
        cache = DynamicCache()
        for layer in range(kv.shape[0]):
            cache.update(kv[layer, 0].permute(1, 0, 2)[None].clone(), kv[layer, 1].permute(1, 0, 2)[None].clone(), layer)
        pos = kv.shape[2]
        while len(tokens) < max_tokens and tokens[-1] != eos:
            out = model(torch.tensor([[tokens[-1]]]), position_ids=torch.tensor([[pos]]), use_cache=True, **_cache_kw(cache))
            logits = out.logits[0, -1]
            top = torch.topk(logits, 2).values
            tokens.append(int(logits.argmax()))
            gaps.append(float(top[0] - top[1]))
            cache, pos = _cache_of(out), pos + 1
    return tuple(tokens), tuple(gaps)


@functools.cache
def hf_greedy(prompt: tuple[int, ...], max_tokens: int, ignore_eos: bool) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """HF's greedy completion of the prompt (the EOS included when it stops there) and each token's top-2 gap."""
    kv = hf_prompt_kv(prompt)
    with oracle(), torch.no_grad():
        logits = hf_model()(torch.tensor([prompt])).logits[0, -1]
    top = torch.topk(logits, 2).values
    tokens, gaps = hf_continue(kv, int(logits.argmax()), max_tokens, None if ignore_eos else EOS)
    return tokens, (float(top[0] - top[1]),) + gaps[1:]


def check_tokens(got: tuple | list, want: tuple, gaps: tuple, near_tie: float, where: str) -> None:
    """got must equal want up to the first near-tie (gap < near_tie), and in full when there is none."""
    got = tuple(int(t) for t in got)
    cut = next((i for i, g in enumerate(gaps) if g < near_tie), None)
    if cut is None:
        assert got == want, f"{where}: tokens differ from HF greedy on the same weights (first at #{_first_diff(got, want)})\n  got:  {got}\n  want: {want}"
    else:
        assert got[:cut] == want[:cut], (f"{where}: tokens before HF's first near-tie (#{cut}) differ (first at "
                                          f"#{_first_diff(got, want)})\n  got:  {got}\n  want: {want}")


def _first_diff(a: tuple, b: tuple) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


# ---- a decode worker that fails, for the router's tests (in the worker) ---------------------------
class Faulty:
    """A decode worker wrapper (test code, in the worker), as a stub for a crashed or confused process
    would behave. `die_at` = (method name, n): the n-th call of that method (1-based) and every call
    after it raise ConnectionError (`after` counts the calls made after the death); `echo` = n: each
    step's outputs come twice, plus made-up outputs (tokens 1, 2, 3) for request 999 and for each of
    requests 0..n-1 this worker does not hold; `patience` = n: the n-th `can_reserve` raises
    AssertionError (a router that asks again and again within one round instead of waiting for the
    next). `refused` counts the `can_reserve` calls answered False."""

    def __init__(self, worker, die_at: tuple | None = None, echo: int = 0, patience: int = 0) -> None:
        self.worker, self.die_at, self.echo, self.calls, self.dead, self.after = worker, die_at, echo, {}, False, 0
        self.patience, self.refused = patience, 0

    def _call(self, name: str):
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.dead:
            self.after += 1
            raise ConnectionError(f"dead ({name})")
        if self.die_at is not None and self.die_at[0] == name and self.calls[name] >= self.die_at[1]:
            self.dead = True
            raise ConnectionError(f"died in {name}")

    @property
    def load(self):
        self._call("load")
        return self.worker.load

    def can_reserve(self, *args):
        self._call("can_reserve")
        if self.patience and self.calls["can_reserve"] >= self.patience:
            raise AssertionError(f"can_reserve was asked {self.calls['can_reserve']} times: the router keeps asking "
                                 "about a request no worker can take now instead of stopping the round")
        fits = self.worker.can_reserve(*args)
        self.refused += not fits
        return fits

    def reserve(self, *args):
        self._call("reserve")
        return self.worker.reserve(*args)

    def admit(self, message):
        self._call("admit")
        return self.worker.admit(message)

    def step(self):
        self._call("step")
        outs = self.worker.step()
        if self.echo:  # every output twice, a request never submitted, and the requests held elsewhere
            from disagg import DecodeOutput

            here = set(self.worker.reserved) | set(self.worker.llm.scheduler.live) | {o.request_id for o in outs}
            foreign = [DecodeOutput(r, (1, 2, 3), "length") for r in range(self.echo) if r not in here]
            outs = outs + outs + [DecodeOutput(999, (1, 2, 3), "length")] + foreign
        return outs
