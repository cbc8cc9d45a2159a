"""Shared by tests/ and hidden/: the course pair, the oracles, and the worker-side runs.

Oracles, all computed here in the judge and never from the package:
- the target's and the draft's next-token distributions from transformers' own LlamaForCausalLM on
  the course weights (float32), processed by `probs_oracle` (temperature, then top-p, written from
  the handout's definition);
- `replay_oracle`: speculative decoding replayed from the same generator seed with those
  distributions, drawing in the order the handout fixes, so the tokens must agree one for one;
- exact output distributions of a round by enumeration over the drafts and the acceptance events.
The worker-side helpers (`in_worker`) load the stage-1 models the package is given and call it.
"""

from __future__ import annotations

import functools
import itertools

import pytest
import torch

from autograder.testing import course_model_dir, in_worker, oracle, tolerances

torch.set_num_threads(1)  # small models: one thread is fast enough and immune to a busy machine


@pytest.fixture(scope="session")
def tol():
    from pathlib import Path

    return tolerances(Path(__file__).parent)


def pair_dirs() -> tuple[str, str]:
    target, draft = course_model_dir("course-llama"), course_model_dir("course-llama-draft")
    if target is None or draft is None:
        pytest.skip("the course models are not built here (datasets/models)")
    return str(target), str(draft)


@functools.cache
def hf_model(folder: str):
    from transformers import LlamaForCausalLM

    with oracle():
        return LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def hf_logits(folder: str, token_ids: list[int]) -> torch.Tensor:
    """(len, V) float32 logits of transformers' model over token_ids."""
    with oracle(), torch.no_grad():
        return hf_model(folder)(torch.tensor([token_ids])).logits[0].float()


def probs_oracle(logits: torch.Tensor, temperature: float, top_p: float = 1.0) -> torch.Tensor:
    """(T, V) -> (T, V): one-hot argmax at temperature 0; else softmax(logits / T) restricted to the
    smallest set of most likely tokens whose mass reaches top_p (mass strictly before a token < top_p)."""
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    order = probs.argsort(dim=-1, descending=True)
    sorted_p = probs.gather(-1, order)
    keep_sorted = (sorted_p.cumsum(-1) - sorted_p) < top_p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    probs = probs * keep
    return (probs / probs.sum(-1, keepdim=True)).float()


def prompt(n: int, part: int = 0) -> list[int]:
    """The first n token ids of the course's eval text from character part * 4000 on (real text, so
    the pair agrees as it does on text)."""
    import coursedata

    tok = coursedata.load_tokenizer()
    return list(tok.encode(coursedata.eval_text()[part * 4000: part * 4000 + 8000]))[:n]


def request(n: int, part: int, max_new: int, gamma: int, temperature: float, top_p: float, seed: int) -> str:
    """One speculative_generate call of the tests, in words (the prompt as `prompt(n, part)` makes it)."""
    return (f"speculative_generate(prompt: the first {n} tokens of the eval text from character {part * 4000}, "
            f"max_new_tokens={max_new}, gamma={gamma}, temperature={temperature}, top_p={top_p}, "
            f"generator=torch.Generator().manual_seed({seed}), the one every draw comes from)")


def first_difference(got: list[int], want: list[int], want_rounds: list[int]) -> str:
    """Where two token lists part: the generated position, its round and place in the round (from
    the expected round lengths), the expected and the actual token; '' when they agree."""
    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    if got == want:
        return ""
    if k == min(len(got), len(want)):
        return f"{len(got)} tokens generated, {len(want)} expected; the first {k} agree"
    r, start = 0, 0
    while r < len(want_rounds) - 1 and start + want_rounds[r] <= k:
        start, r = start + want_rounds[r], r + 1
    j, size = k - start + 1, want_rounds[r]
    role = ("an accepted draft" if j < size else
            "the round's last token (the target's: from the residual after a rejection, the bonus after none)")
    return (f"generated token {k} is {got[k]}, expected {want[k]} (counting from 0; the {k} before it agree; "
            f"round {r + 1}, token {j} of the {size} it should make: {role})")


def replay_mismatch(run: dict, want_tokens: list[int], want_rounds: list[int]) -> str:
    """'' when a run (spec_runs' dict) made the expected tokens in the expected rounds, else what
    differs first (the line a report shows), then both runs in full."""
    diff = first_difference(run["tokens"], want_tokens, want_rounds)
    if not diff and run["rounds"] == want_rounds:
        return ""
    if not diff:
        r = next((i for i, (a, b) in enumerate(zip(run["rounds"], want_rounds)) if a != b),
                 min(len(run["rounds"]), len(want_rounds)))
        got_r = run["rounds"][r] if r < len(run["rounds"]) else "none"
        want_r = want_rounds[r] if r < len(want_rounds) else "none"
        diff = f"the tokens agree, but round {r + 1} made {got_r} tokens, expected {want_r}"
    return (f"{diff}\n  expected tokens {want_tokens}\n  got tokens      {run['tokens']}"
            f"\n  expected tokens per round {want_rounds}\n  got tokens per round      {run['rounds']}")


def assert_replays(run: dict, call: str, want: tuple[list[int], list[int]]) -> None:
    """The run must be replay_oracle's (or greedy's) draw for draw; the failure says what differs
    first, in which call, then both runs in full."""
    problem = replay_mismatch(run, *want)
    if problem:
        first, _, rest = problem.partition("\n")
        raise AssertionError(f"{first}\n  in {call}\n{rest}")


def replay_oracle(prompt_ids: list[int], max_new: int, gamma: int, temperature: float, top_p: float,
                  seed: int) -> tuple[list[int], list[int]]:
    """Speculative decoding by the handout's recipe on transformers' models (no cache: each
    distribution from a full forward), the generator drawn in the handout's order: gamma draft
    multinomials, then torch.rand(gamma), then one multinomial. Returns (tokens, round_tokens)."""
    target, draft = pair_dirs()
    gen = torch.Generator().manual_seed(seed)
    seq, rounds = list(prompt_ids), []
    while len(seq) - len(prompt_ids) < max_new:
        drafts, qs = [], []
        for _ in range(gamma):
            q = probs_oracle(hf_logits(draft, seq + drafts)[-1:], temperature, top_p)[0]
            drafts.append(int(torch.multinomial(q, 1, generator=gen)))
            qs.append(q)
        p = probs_oracle(hf_logits(target, seq + drafts)[len(seq) - 1:], temperature, top_p)
        u = torch.rand(gamma, generator=gen)
        n = 0
        while n < gamma and float(u[n]) * float(qs[n][drafts[n]]) < float(p[n, drafts[n]]):
            n += 1
        dist = p[gamma] if n == gamma else (p[n] - qs[n]).clamp(min=0)
        if n < gamma and float(dist.sum()) == 0:
            dist = p[n]
        token = int(torch.multinomial(dist / dist.sum(), 1, generator=gen))
        seq += drafts[:n] + [token]
        rounds.append(n + 1)
    return seq[len(prompt_ids):len(prompt_ids) + max_new], rounds


@functools.cache
def _pair_in_worker(target: str, draft: str, device: str, dtype: str):
    from transformer import load_model

    dt = getattr(torch, dtype)
    return load_model(target, dtype=dt, device=device), load_model(draft, dtype=dt, device=device)


@in_worker
def spec_runs(target: str, draft: str, prompt_ids: list[int], max_new: int, gamma: int, temperature: float,
              top_p: float, seeds: list[int], device: str = "cpu", dtype: str = "float32") -> list[dict]:
    """In the worker: speculative_generate on the stage-1 models, one run per seed."""
    from specdec import speculative_generate
    from transformer import SamplingParams

    t, d = _pair_in_worker(target, draft, device, dtype)
    params = SamplingParams(temperature=temperature, top_p=top_p)
    out = []
    for seed in seeds:
        gen = torch.Generator(device).manual_seed(seed)
        o = speculative_generate(t, d, prompt_ids, max_new_tokens=max_new, gamma=gamma, params=params, generator=gen)
        out.append({"tokens": list(o.tokens), "rounds": list(o.round_tokens), "draft_calls": o.draft_calls,
                    "target_calls": o.target_calls, "tokens_per_call": o.tokens_per_call})
    return out


@in_worker
def acceptance_in_worker(target: str, draft: str, token_ids: list[int], prompt_len: int, temperature: float,
                         top_p: float) -> torch.Tensor:
    from specdec import measure_acceptance
    from transformer import SamplingParams

    t, d = _pair_in_worker(target, draft, "cpu", "float32")
    return measure_acceptance(t, d, token_ids, prompt_len, SamplingParams(temperature=temperature, top_p=top_p))


@in_worker
def to_probs_in_worker(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    from specdec import to_probs
    from transformer import SamplingParams

    return to_probs(logits, SamplingParams(temperature=temperature, top_p=top_p))


def betas_oracle(token_ids: list[int], prompt_len: int, temperature: float, top_p: float) -> torch.Tensor:
    """sum min(p, q) at every generated position, from transformers' models."""
    target, draft = pair_dirs()
    rows = slice(prompt_len - 1, len(token_ids) - 1)
    p = probs_oracle(hf_logits(target, token_ids)[rows], temperature, top_p)
    q = probs_oracle(hf_logits(draft, token_ids)[rows], temperature, top_p)
    return torch.minimum(p, q).sum(-1)


def rows(seed: int, n: int, v: int, sharp: float = 2.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(n, v, generator=g) * sharp, dim=-1)


def round_distribution(q: torch.Tensor, p: torch.Tensor, g: int, accept_fn) -> dict[tuple, float]:
    """The exact distribution of a round's tokens, from `accept` enumerated: every draft sequence
    (probability prod q), every acceptance pattern (a uniform just under / at 0.9999 above each p/q:
    the event 'accepted' has probability min(1, p/q)), then the next token from accept's dist."""
    v = q.shape[1]
    out: dict[tuple, float] = {}
    for drafts in itertools.product(range(v), repeat=g):
        w = float(torch.prod(torch.stack([q[i, d] for i, d in enumerate(drafts)])))
        if w == 0:
            continue
        ratios = [min(1.0, float(p[i, d] / q[i, d])) for i, d in enumerate(drafts)]
        for n_try in range(g + 1):  # the first rejection at n_try (g: none)
            pw = 1.0
            for i in range(n_try):
                pw *= ratios[i]
            if n_try < g:
                pw *= 1 - ratios[n_try]
            if pw == 0:
                continue
            u = torch.tensor([ratios[i] * 0.5 if i < n_try else (ratios[i] + 1) / 2 for i in range(g)])
            n, dist = accept_fn(torch.tensor(drafts), q, p, u)
            assert n == n_try, f"drafts {drafts}, p/q {ratios}, uniforms {u.tolist()}: accepted {n}, expected {n_try}"
            for t in range(v):
                if float(dist[t]) > 0:
                    key = drafts[:n] + (t,)
                    out[key] = out.get(key, 0.0) + w * pw * float(dist[t])
    return out
