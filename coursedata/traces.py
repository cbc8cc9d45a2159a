"""Request traces for serving exercises: seeded generators and the JSON files they write.

A trace is a list of requests, each with an arrival time (seconds from the start), a prompt
length and an output length in tokens. Generators are pure functions of their seed, so the
committed files under datasets/traces/ can be regenerated bit for bit (datasets/make_traces.py).

- nanovllm:    nano-vllm's benchmark workload: 256 requests, prompt and output lengths uniform
               in [100, 1024], all arriving at t = 0 (Python's `random` seeded with 0, drawn in
               the same order as nano-vllm's bench.py, so the lengths are the same).
- sharegpt:    ShareGPT-like chat: log-normal prompt and output lengths, Poisson arrivals.
- bursty:      same lengths, gamma inter-arrival times with shape 0.25 (bursts and lulls; the
               "burstiness" knob of vLLM's serving benchmark, where 1.0 is Poisson).
- long_prompt: long prompts (uniform in [2048, 8192]) and short outputs, Poisson arrivals.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class TraceRequest:
    arrival_s: float
    prompt_len: int
    output_len: int

    def __post_init__(self) -> None:
        if self.arrival_s < 0 or self.prompt_len < 1 or self.output_len < 1:
            raise ValueError(f"invalid request {self}")


@dataclass(frozen=True)
class Trace:
    name: str
    seed: int
    description: str
    params: dict
    requests: tuple[TraceRequest, ...] = field(default_factory=tuple)

    def __len__(self) -> int:
        return len(self.requests)

    def fit(self, max_model_len: int) -> "Trace":
        """Copy whose prompts are cut so that prompt_len + output_len <= max_model_len."""
        reqs = []
        for r in self.requests:
            out = min(r.output_len, max_model_len - 1)
            reqs.append(TraceRequest(r.arrival_s, min(r.prompt_len, max_model_len - out), out))
        return Trace(self.name, self.seed, self.description,
                     {**self.params, "fit_max_model_len": max_model_len}, tuple(reqs))

    def prompt_token_ids(self, vocab_size: int, low: int = 2) -> list[list[int]]:
        """Random prompt token ids in [low, vocab_size), seeded by the trace's seed (ids below
        `low` are special tokens: 0 = end of text, 1 = padding for the course models)."""
        rng = np.random.default_rng(self.seed + 1)
        return [rng.integers(low, vocab_size, r.prompt_len).tolist() for r in self.requests]

    def to_json(self) -> str:
        rows = [[round(r.arrival_s, 6), r.prompt_len, r.output_len] for r in self.requests]
        head = {"name": self.name, "seed": self.seed, "description": self.description,
                "params": self.params, "columns": ["arrival_s", "prompt_len", "output_len"]}
        body = ",\n".join(json.dumps(row) for row in rows)
        return json.dumps(head, indent=1)[:-2] + ',\n "requests": [\n' + body + "\n ]\n}\n"

    @classmethod
    def from_json(cls, text: str) -> "Trace":
        d = json.loads(text)
        if d.get("columns") != ["arrival_s", "prompt_len", "output_len"]:
            raise ValueError("unexpected trace columns")
        reqs = tuple(TraceRequest(float(a), int(p), int(o)) for a, p, o in d["requests"])
        return cls(d["name"], d["seed"], d["description"], d["params"], reqs)

    @classmethod
    def load(cls, path: Path) -> "Trace":
        return cls.from_json(Path(path).read_text())


def nanovllm(seed: int = 0, num_seqs: int = 256, max_input_len: int = 1024,
             max_output_len: int = 1024) -> Trace:
    rng = random.Random(seed)
    # nano-vllm draws each prompt's length, then its token ids in [0, 10000], then all output
    # lengths; the ids are drawn (and dropped) so the output lengths match its stream.
    prompt_lens = []
    for _ in range(num_seqs):
        n = rng.randint(100, max_input_len)
        for _ in range(n):
            rng.randint(0, 10000)
        prompt_lens.append(n)
    output_lens = [rng.randint(100, max_output_len) for _ in range(num_seqs)]
    reqs = tuple(TraceRequest(0.0, p, o) for p, o in zip(prompt_lens, output_lens))
    params = dict(num_seqs=num_seqs, max_input_len=max_input_len, max_output_len=max_output_len)
    return Trace("nanovllm", seed, "nano-vllm benchmark: 256 requests, lengths uniform in "
                 "[100, 1024], all at t=0", params, reqs)


def _lognormal_lengths(rng, n, median, sigma, lo, hi) -> np.ndarray:
    return np.clip(np.rint(rng.lognormal(np.log(median), sigma, n)), lo, hi).astype(int)


def sharegpt(seed: int = 1, n: int = 1000, rate: float = 8.0) -> Trace:
    rng = np.random.default_rng(seed)
    params = dict(n=n, rate_per_s=rate, prompt_median=180, prompt_sigma=1.0, prompt_max=2048,
                  output_median=220, output_sigma=0.8, output_max=1024)
    prompts = _lognormal_lengths(rng, n, 180, 1.0, 4, 2048)
    outputs = _lognormal_lengths(rng, n, 220, 0.8, 4, 1024)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    reqs = tuple(TraceRequest(float(a), int(p), int(o)) for a, p, o in zip(arrivals, prompts, outputs))
    return Trace("sharegpt", seed, "ShareGPT-like: log-normal lengths, Poisson arrivals", params, reqs)


def bursty(seed: int = 2, n: int = 512, rate: float = 8.0, shape: float = 0.25) -> Trace:
    rng = np.random.default_rng(seed)
    params = dict(n=n, rate_per_s=rate, gamma_shape=shape, prompt_median=180, prompt_sigma=1.0,
                  output_median=220, output_sigma=0.8)
    prompts = _lognormal_lengths(rng, n, 180, 1.0, 4, 2048)
    outputs = _lognormal_lengths(rng, n, 220, 0.8, 4, 1024)
    # gamma inter-arrivals with mean 1/rate; shape < 1 clusters requests into bursts
    arrivals = np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), n))
    reqs = tuple(TraceRequest(float(a), int(p), int(o)) for a, p, o in zip(arrivals, prompts, outputs))
    return Trace("bursty", seed, "bursty: gamma(shape 0.25) inter-arrivals, ShareGPT-like lengths",
                 params, reqs)


def long_prompt(seed: int = 3, n: int = 128, rate: float = 2.0) -> Trace:
    rng = np.random.default_rng(seed)
    params = dict(n=n, rate_per_s=rate, prompt_range=[2048, 8192], output_range=[32, 256])
    prompts = rng.integers(2048, 8192, n, endpoint=True)
    outputs = rng.integers(32, 256, n, endpoint=True)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    reqs = tuple(TraceRequest(float(a), int(p), int(o)) for a, p, o in zip(arrivals, prompts, outputs))
    return Trace("long_prompt", seed, "long prompts, short outputs, Poisson arrivals", params, reqs)


GENERATORS = {"nanovllm": nanovllm, "sharegpt": sharegpt, "bursty": bursty,
              "long_prompt": long_prompt}


def generate(name: str) -> Trace:
    """The committed trace `name`, regenerated from its default seed and parameters."""
    if name not in GENERATORS:
        raise ValueError(f"unknown trace {name!r}; known: {sorted(GENERATORS)}")
    return GENERATORS[name]()


__all__ = ["Trace", "TraceRequest", "GENERATORS", "generate"]
