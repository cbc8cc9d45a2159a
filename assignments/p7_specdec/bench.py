"""Speculative decoding's speedup against gamma, measured and predicted (needs a GPU; run from the
assignment folder with your package and the given ones).

    python bench.py --out figs/        # speedup_vs_gamma.png and bench.json

Speedup: target-alone decoding (stage 1's `generate`) time / speculative time for 256 tokens at
T = 1, gamma = 1 .. 6, on the course pair; predicted = (1 - a^(g+1)) / ((1 - a)(g c + 1)) with a
from `measure_acceptance` on the same run and c = draft time per token / target time per token.
The handout's stall timelines come from the GPU tier's chunked-prefill run (Llama-3-8B shapes, 8
layers), each drawn with plot_timeline.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from specdec import (
    expected_speedup,
    measure_acceptance,
    speculative_generate,
)
from transformer import SamplingParams, generate, load_model


def course_dir(name: str) -> Path:
    for root in (Path.cwd(), *Path.cwd().parents):
        if (root / "datasets" / "models" / name / "config.json").is_file():
            return root / "datasets" / "models" / name
    raise SystemExit(f"datasets/models/{name} not found above {Path.cwd()}")


def seconds(fn) -> float:
    fn()
    times = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[1]


def speedups(out: Path, n: int = 256) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = load_model(course_dir("course-llama"), dtype=torch.bfloat16, device="cuda")
    draft = load_model(course_dir("course-llama-draft"), dtype=torch.bfloat16, device="cuda")
    params = SamplingParams(temperature=1.0)
    prompt = list(range(2, 34))
    alone = lambda m: lambda: generate(m, torch.tensor([prompt], device="cuda"), max_new_tokens=n,
                                       sampling=params, generator=torch.Generator("cuda").manual_seed(0))
    t_target, t_draft = seconds(alone(target)), seconds(alone(draft))
    c = t_draft / t_target
    rows = []
    for gamma in range(1, 7):
        runs: list = []

        def fn(runs=runs, gamma=gamma):
            runs.append(speculative_generate(target, draft, prompt, max_new_tokens=n, gamma=gamma, params=params,
                                             generator=torch.Generator("cuda").manual_seed(0)))

        t_spec = seconds(fn)
        alpha = float(measure_acceptance(target, draft, prompt + list(runs[-1].tokens), len(prompt), params).mean())
        rows.append({"gamma": gamma, "alpha": alpha, "c": c, "tokens_per_call": runs[-1].tokens_per_call,
                     "measured": t_target / t_spec, "predicted": expected_speedup(alpha, gamma, c)})
        print(rows[-1])
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    g = [r["gamma"] for r in rows]
    ax.plot(g, [r["measured"] for r in rows], "o-", label="measured")
    ax.plot(g, [r["predicted"] for r in rows], "s--", label="(1 - a^(g+1)) / ((1 - a)(g c + 1))")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xlabel("gamma (draft tokens per round)")
    ax.set_ylabel("speedup over the target alone")
    ax.set_title(f"course pair, {torch.cuda.get_device_name(0)}, c = {c:.2f}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "speedup_vs_gamma.png", dpi=110)
    return {"rows": rows, "t_target": t_target, "t_draft": t_draft}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("figs"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"device": torch.cuda.get_device_name(0), "speedup": speedups(args.out)}
    (args.out / "bench.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
