"""Time your engine's pure decode steps one by one and write the data the step analysis starts from.

    python step_profile.py                      # CPU: the "small" model, 16 sequences of 256 tokens
    python step_profile.py --device cuda        # GPU: the ~250M model in bf16, 64 sequences of 1024

It builds a seeded random LLaMA (bench.py's presets), adds `batch` requests of `context` prompt
tokens, steps until every prompt is prefilled, then times `steps` further steps, each a pure
decode of `batch` rows. For each it records the wall seconds (synchronized on a GPU) and the
tokens the running sequences held before it. With the engine's own counts of what a decode step
reads (weight bytes, embedding-table bytes, KV bytes per token) and the copy bandwidth of the same
device, measured in the same run, it writes answers/step_profile.json; the README's "Analysis"
section says what to compute from it.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
from bench import PRESETS, build_random_llama
from minivllm import LLM, SamplingParams

from autograder.timing import copy_bandwidth

SETTINGS = {"cpu": {"preset": "small", "dtype": "float32", "batch": 16, "context": 256},
            "cuda": {"preset": "250m", "dtype": "bfloat16", "batch": 64, "context": 1024}}


def profile(device: str, steps: int) -> dict:
    s = SETTINGS[device]
    path, _ = build_random_llama(s["preset"], device, getattr(torch, s["dtype"]))
    llm = LLM(path, device=device, dtype=s["dtype"], max_num_seqs=s["batch"])
    g = torch.Generator().manual_seed(0)
    vocab = PRESETS[s["preset"]]["vocab_size"]
    for _ in range(s["batch"]):
        prompt = torch.randint(0, vocab, (s["context"],), generator=g).tolist()
        llm.add_request(prompt, SamplingParams(temperature=0, max_tokens=steps + 8, ignore_eos=True))
    sched = llm.scheduler
    while sched.waiting or any(q.num_computed_tokens < q.num_tokens - 1 for q in sched.running):
        llm.step()  # prefill (and its first tokens); from here on a step is a pure decode
    for _ in range(3):
        llm.step()  # warm-up decode steps
    records = []
    for _ in range(steps):
        held = sum(q.num_tokens for q in sched.running)
        rows = len(sched.running)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        llm.step()
        if device == "cuda":
            torch.cuda.synchronize()
        records.append({"seconds": time.perf_counter() - start, "rows": rows, "tokens_held": held})
    runner = llm.model_runner
    embed = runner.model.model.embed_tokens.weight
    return {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or platform.machine(),
        "model": {"preset": s["preset"], "dtype": s["dtype"], **PRESETS[s["preset"]]},
        "weight_bytes": runner.weight_bytes,
        "embedding_bytes": embed.numel() * embed.element_size(),
        "kv_bytes_per_token": runner.kv_bytes_per_token,
        "copy_bytes_per_s": copy_bandwidth(1 << 28, device=device),
        "steps": records,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=sorted(SETTINGS), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=30, help="decode steps timed (at least 10)")
    parser.add_argument("--out", type=Path, default=Path("answers/step_profile.json"))
    args = parser.parse_args()
    data = profile(args.device, max(10, args.steps))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    median = statistics.median(r["seconds"] for r in data["steps"])
    print(f"{len(data['steps'])} decode steps of {data['steps'][0]['rows']} rows on {data['device']}: "
          f"median {median * 1e3:.2f} ms; wrote {args.out}")


if __name__ == "__main__":
    main()
