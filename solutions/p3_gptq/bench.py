"""Draw the speedup of your W4A16 GEMM over a bf16 matmul against M (needs a GPU).

    python bench.py --out speedup.png            # Llama-3-8B's linear shapes, M = 1 .. 256
    python bench.py --m 1 4 16 --json speedup.json

W is random GPTQ v1 (group 128, sequential groups), A random bf16 (M, K). Both sides are timed
as CUDA graph replays, as an engine runs its decode steps: one call captured after a warm-up,
then each replay timed with CUDA events, the L2 cache flushed before it, median of the reps.
Per call (no graph) the host's launch work would be timed instead of the kernel at small M.
speedup = bf16 time / W4A16 time; the graded figure is its geomean over the shapes at M = 1, 4, 16.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics

import torch
from gptq import w4a16_matmul

SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}  # (N, K)
GROUP = 128


def graph_seconds(fn, reps: int = 20) -> float:
    """Median seconds of a CUDA graph replay of fn(), with a 256 MiB write between replays."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    scratch = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    times = []
    for _ in range(reps):
        scratch.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def random_v1(n: int, k: int, seed: int) -> dict[str, torch.Tensor]:
    """Random GPTQ v1 tensors of a (N, K) weight on the GPU: any codes, zero 8, scales ~0.003."""
    gen = torch.Generator("cuda").manual_seed(seed)
    return {"qweight": torch.randint(-2**31, 2**31 - 1, (k // 8, n), generator=gen, device="cuda", dtype=torch.int32),
            "qzeros": torch.full((k // GROUP, n // 8), 0x77777777, dtype=torch.int32, device="cuda"),
            "scales": (torch.rand(k // GROUP, n, generator=gen, device="cuda") * 0.004 + 0.001).half(),
            "g_idx": (torch.arange(k, device="cuda") // GROUP).to(torch.int32)}


def dequantized(t: dict[str, torch.Tensor]) -> torch.Tensor:
    """W (N, K) in bf16 from the v1 tensors (the baseline's weight, and the check's)."""
    codes = torch.stack([(t["qweight"] >> (4 * i)) & 0xF for i in range(8)], dim=1).reshape(-1, t["qweight"].shape[1])
    g = t["g_idx"].long()
    return (t["scales"].float()[g] * (codes - 8).float()).T.contiguous().bfloat16()


def sweep(ms: list[int]) -> list[dict]:
    rows = []
    for i, (name, (n, k)) in enumerate(SHAPES.items()):
        t = random_v1(n, k, seed=i)
        w = dequantized(t)
        for m in ms:
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ours = lambda a=a, t=t: w4a16_matmul(a, t["qweight"], t["qzeros"], t["scales"], t["g_idx"], group_size=GROUP)
            ref = a.float() @ w.float().T
            err = float((ours().float() - ref).abs().mean() / ref.abs().mean())
            w4, bf16 = graph_seconds(ours), graph_seconds(lambda a=a, w=w: a @ w.T)
            rows.append({"shape": name, "n": n, "k": k, "m": m, "w4a16_us": w4 * 1e6, "bf16_us": bf16 * 1e6,
                         "speedup": bf16 / w4, "rel_err": err})
            print(f"{name:8s} M={m:4d}: w4a16 {w4 * 1e6:7.1f} us, bf16 {bf16 * 1e6:7.1f} us, "
                  f"{bf16 / w4:5.2f}x (rel err {err:.1e})", flush=True)
    return rows


def geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs))


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    ms = sorted({r["m"] for r in rows})
    for name in SHAPES:
        ax.plot(ms, [r["speedup"] for m in ms for r in rows if r["shape"] == name and r["m"] == m], "o-", label=name)
    ax.plot(ms, [geomean([r["speedup"] for r in rows if r["m"] == m]) for m in ms], "k--", lw=2, label="geomean")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M (tokens in the batch)")
    ax.set_ylabel("bf16 time / W4A16 time")
    ax.set_title(f"W4A16 (GPTQ v1, g{GROUP}) vs bf16 matmul, Llama-3-8B shapes, {torch.cuda.get_device_name()}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--m", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    parser.add_argument("--out", default="speedup.png", help="the plot (PNG)")
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench.py times GPU kernels: run it on a machine with a CUDA GPU")
    if any(m < 1 for m in args.m):
        raise SystemExit(f"--m takes positive sizes, got {args.m}")
    rows = sweep(args.m)
    graded = [r["speedup"] for r in rows if r["m"] in (1, 4, 16)]
    if graded:
        print(f"geomean over the shapes at M in (1, 4, 16): {geomean(graded):.3f}x")
    plot(rows, args.out)
    print(f"wrote {args.out}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
