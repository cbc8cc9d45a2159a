"""Measure your machine with your own timer: four square matmuls and a large copy, written to
answers/machine.json. The numbers of answers/machine.toml are computed from that file (README,
section "Analysis").

Run it from the assignment folder once your `benchmark` passes its tests:

    python measure_machine.py                 # the GPU if torch sees one, else the CPU
    python measure_machine.py --device cpu
    python measure_machine.py --plot          # draw answers/machine_roofline.png from your files

It takes under a minute on a GPU and one to three minutes on a laptop CPU. Run it on an idle machine
and do not edit its output: the grader checks the file's shape and that its times are physically
possible, and recomputes every number you write from it.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
from pathlib import Path

import torch

SIZES = (128, 512, 2048, 4096)  # n of the n x n @ n x n matmuls: from below the ridge to far above it
COPY_BYTES = 256 * 1024 * 1024  # bigger than any GPU's L2 and any CPU's L3: the copy streams from memory
WARMUP, REPS = 3, 20  # benchmark's defaults
DTYPES = {"cuda": torch.bfloat16, "cpu": torch.float32}  # the dtype each device multiplies fastest in
OUT = Path(__file__).parent / "answers" / "machine.json"


def device_name(dev: torch.device) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    cpuinfo = Path("/proc/cpuinfo")
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
              if line.startswith("model name")] if cpuinfo.exists() else []
    return f"{models[0] if models else platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"


def measure(device: str) -> dict:
    """Every sample of every measurement, timed by your `benchmark` (flush_l2=True)."""
    from hwnumerics import benchmark  # here, not above: the grader imports this file's constants alone

    dev = torch.device(device)
    dtype = DTYPES[dev.type]
    torch.manual_seed(0)
    inputs = {n: (torch.randn(n, n, device=dev).to(dtype), torch.randn(n, n, device=dev).to(dtype)) for n in SIZES}
    matmuls = []
    for n, (a, b) in inputs.items():
        fn = lambda a=a, b=b: torch.matmul(a, b)
        # One call with no warm-up first: for the first size it is the first matmul of the process,
        # so it pays every one-time cost (library start-up, kernel choice, allocation).
        first = benchmark(fn, warmup=0, reps=1, flush_l2=True, device=dev).times_s[0]
        stats = benchmark(fn, warmup=WARMUP, reps=REPS, flush_l2=True, device=dev)
        matmuls.append({"n": n, "first_call_s": first, "times_s": list(stats.times_s)})
    src = torch.ones(COPY_BYTES, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    copy = benchmark(lambda: dst.copy_(src), warmup=WARMUP, reps=REPS, flush_l2=True, device=dev)
    return {
        "device": dev.type,
        "device_name": device_name(dev),
        "torch": torch.__version__,
        "dtype": str(dtype).removeprefix("torch."),
        "dtype_bytes": dtype.itemsize,
        "warmup": WARMUP,
        "reps": REPS,
        "matmul": matmuls,
        "copy": {"nbytes": COPY_BYTES, "times_s": list(copy.times_s)},
    }


def plot(run: dict, answers: dict, path: Path) -> None:
    """Your roofline: the four matmuls at their intensity 2n / (3b) and achieved FLOP/s (medians of
    machine.json), under the roofs of your own answers (copy_gb_per_s and the best tflops_n*), if
    you have written them: a picture to check your numbers and your reading against, not a grade."""
    import statistics

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b = run["dtype_bytes"]
    points = [(2 * m["n"] / (3 * b), 2 * m["n"] ** 3 / statistics.median(m["times_s"]), m["n"]) for m in run["matmul"]]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.scatter([x for x, _, _ in points], [y for _, y, _ in points], zorder=3, label="your matmuls (median)")
    for x, y, n in points:
        ax.annotate(f"n={n}", (x, y), textcoords="offset points", xytext=(5, -12), fontsize=8)
    tflops = [answers.get(f"tflops_n{m['n']}") for m in run["matmul"]]
    bandwidth = answers.get("copy_gb_per_s")
    if all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in (*tflops, bandwidth)):  # nan until answered
        peak, bw = max(tflops) * 1e12, bandwidth * 1e9
        xs = [min(x for x, _, _ in points) / 4, max(x for x, _, _ in points) * 4]
        ridge = peak / bw
        ax.plot([xs[0], ridge, xs[1]], [xs[0] * bw, peak, peak], "k-", lw=1.5,
                label=f"your roofs: {bandwidth:.3g} GB/s, {max(tflops):.3g} TFLOP/s (ridge {ridge:.3g})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(f"{run['device_name']}, {run['dtype']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=sorted(DTYPES), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--plot", action="store_true", help="draw answers/machine_roofline.png from --out and "
                        "answers/machine.toml instead of measuring")
    args = parser.parse_args()
    if args.plot:
        import tomllib

        if not args.out.is_file():
            raise SystemExit(f"{args.out} is missing: run `python measure_machine.py` first")
        toml = args.out.with_suffix(".toml")
        answers = tomllib.loads(toml.read_text()) if toml.is_file() else {}
        image = args.out.parent / "machine_roofline.png"
        plot(json.loads(args.out.read_text()), answers, image)
        print(f"wrote {image}")
        return
    from hwnumerics import summarize

    run = measure(args.device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(run, indent=1) + "\n")
    print(f"{run['device_name']}, {run['dtype']}: wrote {args.out}")
    for m in run["matmul"]:
        s = summarize(m["times_s"])
        print(f"  matmul n={m['n']:5d}: median {s.median_s * 1e3:9.4f} ms  mean {s.mean_s * 1e3:9.4f} ms  "
              f"first call {m['first_call_s'] * 1e3:9.4f} ms")
    s = summarize(run["copy"]["times_s"])
    print(f"  copy {COPY_BYTES >> 20} MiB:  median {s.median_s * 1e3:9.4f} ms  mean {s.mean_s * 1e3:9.4f} ms")
    print("Now compute the numbers of answers/machine.toml from this file (README, section 'Analysis').")


if __name__ == "__main__":
    main()
