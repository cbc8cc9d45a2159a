"""Compare static batching, continuous batching and chunked prefill on request traces.

    python compare.py                                  # the three built-in seeded traces
    python compare.py --trace ../../datasets/traces/bursty.json --out bursty.png
    python compare.py --quick                          # small traces, a few seconds

Prints throughput, TTFT and TPOT at p50/p99, KV utilisation and preemptions for each policy, and
draws KV utilisation over time and the TTFT / TPOT CDFs into a PNG (one row of panels per trace).
A trace file is JSON ({"requests": [[arrival_s, prompt_len, output_len], ...]} or a bare list of
such records) or CSV with those three columns. Needs your finished `kvcache` package.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import time
from pathlib import Path

from kvcache import CostModel, Request, SchedulerConfig, SimConfig, plot_comparison, simulate, summarize

MAX_MODEL_LEN = 8448  # the longest built-in request: 8192 prompt + 256 output


def lognormal_len(rng: random.Random, median: float, sigma: float, cap: int) -> int:
    return max(1, min(cap, round(median * math.exp(sigma * rng.gauss(0.0, 1.0)))))


def sharegpt_like(n: int, rate: float, seed: int, gamma_shape: float | None = None) -> list[Request]:
    """Log-normal lengths (prompt median 180, output median 220); Poisson arrivals, or bursty
    gamma(shape) inter-arrivals with the same mean rate when gamma_shape is given (< 1: bursty)."""
    rng, t, out = random.Random(seed), 0.0, []
    for _ in range(n):
        if gamma_shape is None:
            t += rng.expovariate(rate)
        else:
            t += rng.gammavariate(gamma_shape, 1.0 / (rate * gamma_shape))
        out.append(Request(t, lognormal_len(rng, 180, 1.0, 2048), lognormal_len(rng, 220, 0.8, 1024)))
    return out


def long_prompt(n: int, rate: float, seed: int) -> list[Request]:
    """Prompts uniform in [2048, 8192], outputs uniform in [32, 256], Poisson arrivals."""
    rng, t, out = random.Random(seed), 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(Request(t, rng.randint(2048, 8192), rng.randint(32, 256)))
    return out


def builtin_traces(quick: bool) -> dict[str, list[Request]]:
    k = 4 if quick else 1
    return {
        "sharegpt": sharegpt_like(400 // k, rate=30.0, seed=0),
        "bursty": sharegpt_like(400 // k, rate=30.0, seed=1, gamma_shape=0.25),
        "long_prompt": long_prompt(100 // k, rate=3.0, seed=2),
    }


def load_trace(path: Path) -> list[Request]:
    """Read a JSON or CSV trace of (arrival_s, prompt_len, output_len) records."""
    if path.suffix == ".csv":
        with path.open() as f:
            rows = [r for r in csv.reader(f) if r and not r[0].strip().startswith(("#", "arrival"))]
        return [Request(float(a), int(p), int(o)) for a, p, o in rows]
    data = json.loads(path.read_text())
    records = data["requests"] if isinstance(data, dict) else data
    return [Request(float(a), int(p), int(o)) for a, p, o in records]


def policies(max_model_len: int, budget: int, max_num_seqs: int) -> dict[str, SchedulerConfig]:
    whole = dict(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_model_len, max_model_len=max_model_len,
                 policy="prefill_first", enable_chunked_prefill=False)
    return {
        "static": SchedulerConfig(**whole, static_batching=True),
        "continuous": SchedulerConfig(**whole),
        "chunked": SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=budget,
                                   max_model_len=max_model_len, policy="decode_first", enable_chunked_prefill=True),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, action="append", help="trace file(s); default: built-in traces")
    parser.add_argument("--out", type=Path, default=Path("kv_policies.png"))
    parser.add_argument("--num-blocks", type=int, default=2048, help="KV pool in blocks of 16 tokens")
    parser.add_argument("--budget", type=int, default=512, help="token budget of the chunked policy")
    parser.add_argument("--max-num-seqs", type=int, default=128)
    parser.add_argument("--quick", action="store_true", help="a quarter of each built-in trace")
    args = parser.parse_args()

    traces = {p.stem: load_trace(p) for p in args.trace} if args.trace else builtin_traces(args.quick)
    cost = CostModel()
    kv_gib = args.num_blocks * 16 * cost.kv_bytes_per_token / 2**30
    print(f"Llama-3-8B-like bf16 on an H200-class GPU (roofline cost model); KV pool {kv_gib:.1f} GiB")
    print(f"{'trace':12s} {'policy':11s} {'tok/s':>7s} {'TTFT p50':>9s} {'TTFT p99':>9s} {'TPOT p50':>9s} "
          f"{'TPOT p99':>9s} {'KV mean':>8s} {'preempt':>7s} {'sim s':>6s}")
    runs = {}
    for trace_name, trace in traces.items():
        longest = max(r.prompt_len + r.output_len for r in trace)
        max_model_len = max(MAX_MODEL_LEN, longest)
        for name, sched in policies(max_model_len, args.budget, args.max_num_seqs).items():
            t0 = time.perf_counter()
            res = simulate(trace, SimConfig(scheduler=sched, num_blocks=args.num_blocks, cost=cost))
            s = summarize(res)
            runs.setdefault(trace_name, {})[name] = res
            print(f"{trace_name:12s} {name:11s} {s.throughput_tok_s:7.0f} {s.ttft_p50_s * 1e3:7.0f}ms "
                  f"{s.ttft_p99_s * 1e3:7.0f}ms {s.tpot_p50_s * 1e3:7.1f}ms {s.tpot_p99_s * 1e3:7.1f}ms "
                  f"{100 * s.kv_util_mean:7.0f}% {s.num_preemptions:7d} {time.perf_counter() - t0:6.1f}")
    plot_comparison(runs, args.out)
    print(f"wrote {args.out}")

if __name__ == "__main__":
    main()
