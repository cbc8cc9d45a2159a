"""Bus bandwidth of all-reduce on CPU ranks: your ring and recursive doubling against gloo's own
all_reduce, over a sweep of message sizes, on 2 and 4 ranks of this machine (gloo over loopback,
one process per rank, started with torch.multiprocessing and joined through a FileStore).

    python busbw.py            # 4 KiB .. 64 MiB, 2 and 4 ranks, 9 timed repetitions: a few minutes
    python busbw.py --quick    # up to 1 MiB, 3 repetitions: a smoke test, not enough for the answers

Writes answers/busbw.json (every repetition's time, per world, implementation and size) and
answers/busbw.png (bus bandwidth against size). A repetition's time is the slowest rank's, from a
barrier to the end of its call; the analysis uses the median over repetitions (README, "Analysis").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

SIZES = [4096 * 4**k for k in range(8)]  # bytes: 4 KiB, 16 KiB, ..., 64 MiB (float32 elements: bytes / 4)
WORLDS = (2, 4)
IMPLS = ("ring", "recursive_doubling", "gloo")
REPS, WARMUP = 9, 1
HERE = Path(__file__).resolve().parent


def bus_bandwidth(nbytes: int, world: int, seconds: float) -> float:
    """nccl-tests' all-reduce bus bandwidth in bytes/s: S / t * 2 (n - 1) / n."""
    return nbytes / seconds * 2 * (world - 1) / world


def _rank(rank: int, world: int, store: str, sizes: list[int], reps: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from collectives import recursive_doubling_all_reduce, ring_all_reduce

    torch.set_num_threads(1)  # ranks share the cores: one thread each, like one GPU each
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world)
    impls = {"ring": ring_all_reduce, "recursive_doubling": recursive_doubling_all_reduce, "gloo": dist.all_reduce}
    records = []
    for nbytes in sizes:
        x = torch.empty(nbytes // 4, dtype=torch.float32)
        for name, fn in impls.items():
            times = []
            for _ in range(WARMUP + reps):
                x.fill_(1.0)
                dist.barrier()
                start = time.perf_counter()
                fn(x)
                times.append(time.perf_counter() - start)
            if not bool((x == world).all()):  # a wrong sum would make its bandwidth meaningless
                raise SystemExit(f"{name} on {world} ranks, {nbytes} bytes: the sum is wrong")
            slowest = torch.tensor(times[WARMUP:], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # a collective ends when its last rank does
            records.append({"world": world, "impl": name, "bytes": nbytes, "times_s": slowest.tolist()})
    if rank == 0:
        Path(out).write_text(json.dumps(records))
    dist.destroy_process_group()


def run_world(world: int, sizes: list[int], reps: int) -> list[dict]:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "records.json")
        mp.spawn(_rank, args=(world, os.path.join(tmp, "store"), sizes, reps, out), nprocs=world)
        return json.loads(Path(out).read_text())


def plot(records: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    worlds = sorted({r["world"] for r in records})
    fig, axes = plt.subplots(1, len(worlds), figsize=(5.5 * len(worlds), 4), sharey=True, squeeze=False)
    for ax, world in zip(axes[0], worlds):
        for impl in IMPLS:
            rows = sorted((r for r in records if r["world"] == world and r["impl"] == impl), key=lambda r: r["bytes"])
            sizes = [r["bytes"] for r in rows]
            bw = [bus_bandwidth(r["bytes"], world, statistics.median(r["times_s"])) / 1e9 for r in rows]
            ax.plot(sizes, bw, marker="o", label=impl)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size S (bytes)")
        ax.set_title(f"all-reduce, {world} CPU ranks (gloo)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("bus bandwidth (GB/s, median of reps)")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="up to 1 MiB, 3 repetitions (a smoke test)")
    parser.add_argument("--out", type=Path, default=HERE / "answers" / "busbw.json")
    args = parser.parse_args()
    sizes, reps = (SIZES[:6], 3) if args.quick else (SIZES, REPS)
    import torch

    records = []
    for world in WORLDS:
        start = time.monotonic()
        records += run_world(world, sizes, reps)
        print(f"{world} ranks: {time.monotonic() - start:.0f} s")
    data = {
        "note": "busbw.py: all-reduce of float32 on CPU ranks over gloo; times_s: the slowest rank's time of each "
                "timed repetition, from a barrier to the end of the call",
        "host": {"machine": platform.machine(), "processor": platform.processor() or platform.machine(),
                 "cpus": os.cpu_count(), "torch": torch.__version__},
        "dtype": "float32",
        "warmup": WARMUP,
        "records": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    plot(records, args.out.with_suffix(".png"))
    print(f"{'world':>5} {'impl':>18} " + " ".join(f"{s:>9}" for s in sizes) + "   busbw GB/s (median)")
    for world in WORLDS:
        for impl in IMPLS:
            rows = {r["bytes"]: r for r in records if r["world"] == world and r["impl"] == impl}
            bws = [bus_bandwidth(s, world, statistics.median(rows[s]["times_s"])) / 1e9 for s in sizes]
            print(f"{world:>5} {impl:>18} " + " ".join(f"{b:9.3f}" for b in bws))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
