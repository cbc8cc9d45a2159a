"""Draw TFLOP/s against sequence length for flashattn and torch's SDPA backends (needs a GPU).

    python bench.py --head-dim 128 --causal --out tflops_d128_causal.png

Shapes follow the graded benchmark: bf16, B * N = 16k tokens and H * d = 2048 at every N.
FLOPs = 4 B H N^2 d for the forward (half when causal), x 3.5 for forward + backward.
Timing: CUDA events around each call, the L2 cache flushed before it, median of the reps.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashattn import flash_attention

BACKENDS = {"sdpa flash": SDPBackend.FLASH_ATTENTION, "sdpa cudnn": SDPBackend.CUDNN_ATTENTION,
            "sdpa efficient": SDPBackend.EFFICIENT_ATTENTION}


def median_seconds(fn, warmup: int = 3, reps: int = 10) -> float:
    """Median time of fn() in seconds, with a 256 MiB write between calls to flush the L2."""
    scratch = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        scratch.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def attention_fns(causal: bool):
    """name -> attention(q, k, v) for our kernel and each SDPA backend."""
    fns = {"flashattn (ours)": lambda q, k, v: flash_attention(q, k, v, causal=causal)}
    for name, backend in BACKENDS.items():
        def sdpa(q, k, v, backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        fns[name] = sdpa
    return fns


def measure_tflops(seq_len: int, head_dim: int, causal: bool, backward: bool,
                   tokens: int, width: int) -> dict[str, float]:
    """TFLOP/s of each implementation at one sequence length (NaN where a backend refuses)."""
    b, h = max(1, tokens // seq_len), width // head_dim
    q, k, v, do = (torch.randn(b, h, seq_len, head_dim, device="cuda", dtype=torch.bfloat16)
                   for _ in range(4))
    q, k, v = (t.requires_grad_(backward) for t in (q, k, v))
    flops = 4 * b * h * seq_len**2 * head_dim / (2 if causal else 1) * (3.5 if backward else 1)
    out = {}
    for name, fn in attention_fns(causal).items():
        def call(fn=fn):
            o = fn(q, k, v)
            if backward:
                torch.autograd.grad(o, (q, k, v), do)
        try:
            out[name] = flops / median_seconds(call) / 1e12
        except RuntimeError:
            out[name] = float("nan")
    return out


def plot(results: dict[str, dict[int, dict[str, float]]], title: str, path: str) -> None:
    """One panel per mode (forward, forward + backward), one line per implementation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.5), squeeze=False)
    for ax, (mode, by_len) in zip(axes[0], results.items()):
        lens = sorted(by_len)
        for name in next(iter(by_len.values())):
            ax.plot(lens, [by_len[n][name] for n in lens], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length N")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{mode}: {title}")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--seq-lens", default="512,1024,2048,4096,8192,16384")
    p.add_argument("--modes", default="fwd,fwdbwd", help="fwd, fwdbwd or both")
    p.add_argument("--tokens", type=int, default=16384, help="B * N")
    p.add_argument("--width", type=int, default=2048, help="H * d")
    p.add_argument("--out", default="tflops.png")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench.py needs a CUDA GPU")
    results: dict[str, dict[int, dict[str, float]]] = {}
    for mode in args.modes.split(","):
        results[mode] = {}
        for n in (int(s) for s in args.seq_lens.split(",")):
            tf = measure_tflops(n, args.head_dim, args.causal, mode == "fwdbwd", args.tokens,
                                args.width)
            results[mode][n] = tf
            print(f"{mode} N={n}: " + ", ".join(f"{k} {v:.0f}" for k, v in tf.items()))
            torch.cuda.empty_cache()
    title = (f"bf16 d={args.head_dim} {'causal' if args.causal else 'full'}, "
             f"{torch.cuda.get_device_name()}")
    plot(results, title, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
