"""Bus bandwidth of all-reduce on GPUs over NCCL: your ring (point-to-point on CUDA tensors) against
NCCL's own all_reduce, 4 KiB to 1 GiB, one process per GPU of this machine (at least two).

    python busbw_gpus.py                 # every GPU of the machine, 4 KiB .. 1 GiB, 20 timed repetitions
    python busbw_gpus.py --world 2       # two of them
    python busbw_gpus.py --max-mib 64    # a shorter sweep

Writes answers/busbw_gpus.json (every repetition's time, per implementation and size) and
answers/busbw_gpus.png: algorithm and bus bandwidth against size, with the device's NVLink figure
per direction (the datasheet's total over both directions, halved) as the ceiling. A repetition's
time is the slowest rank's, CUDA events around the call after a barrier; the table reports medians.
Keep NVLink SHARP / multicast off (NCCL_NVLS_ENABLE=0): the figures compare point-to-point rings.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

from busbw import bus_bandwidth

SIZES = [4096 * 4**k for k in range(10)]  # bytes: 4 KiB, 16 KiB, ..., 1 GiB (float32 elements: bytes / 4)
IMPLS = ("ring", "nccl")
REPS, WARMUP = 20, 3
# NVLink per GPU, both directions together, from the datasheets (ANCHORS.md: H100 SXM / H200 900 GB/s)
NVLINK_GBS = {"H100": 900.0, "H200": 900.0}
HERE = Path(__file__).resolve().parent


def nvlink_per_direction_gbs(device_name: str) -> float | None:
    """The datasheet's NVLink bandwidth per direction in GB/s for a device name, None if unknown."""
    return next((total / 2 for key, total in NVLINK_GBS.items() if key in device_name), None)


def _time_call(fn, x, world: int, reps: int) -> list[float]:
    """The slowest rank's seconds of each timed call of fn(x), after WARMUP untimed ones."""
    import torch
    import torch.distributed as dist

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(WARMUP + reps):
        x.fill_(1.0)
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        fn(x)
        end.record()
        torch.cuda.synchronize()
        if i >= WARMUP:
            times.append(start.elapsed_time(end) / 1e3)
    if not bool((x == world).all()):  # a wrong sum would make its bandwidth meaningless
        raise SystemExit(f"{getattr(fn, '__name__', fn)}: the sum of {x.numel()} elements is wrong")
    slowest = torch.tensor(times, dtype=torch.float64, device=x.device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # a collective ends when its last rank does
    return slowest.tolist()


def _rank(rank: int, world: int, store: str, sizes: list[int], reps: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from collectives import ring_all_reduce

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", store=dist.FileStore(store, world), rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    impls = {"ring": ring_all_reduce, "nccl": dist.all_reduce}
    records = []
    for nbytes in sizes:
        x = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
        for name, fn in impls.items():
            records.append({"world": world, "impl": name, "bytes": nbytes, "times_s": _time_call(fn, x, world, reps)})
        del x
    if rank == 0:
        Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                         "nccl": ".".join(map(str, torch.cuda.nccl.version())), "records": records}))
    dist.destroy_process_group()


def rows(records: list[dict]) -> list[dict]:
    """Per implementation and size: median seconds, algorithm and bus bandwidth (GB/s)."""
    out = []
    for r in sorted(records, key=lambda r: (r["impl"], r["bytes"])):
        t = statistics.median(r["times_s"])
        out.append({"impl": r["impl"], "bytes": r["bytes"], "median_s": t, "algbw_gbs": r["bytes"] / t / 1e9,
                    "busbw_gbs": bus_bandwidth(r["bytes"], r["world"], t) / 1e9})
    return out


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table, world = rows(data["records"]), data["records"][0]["world"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, key, label in ((axes[0], "algbw_gbs", "algorithm bandwidth S / t"), (axes[1], "busbw_gbs", "bus bandwidth")):
        for impl in IMPLS:
            mine = [r for r in table if r["impl"] == impl]
            ax.plot([r["bytes"] for r in mine], [r[key] for r in mine], marker="o", label=impl)
        if (ceiling := nvlink_per_direction_gbs(data["device"])) is not None:
            ax.axhline(ceiling, color="gray", linestyle="--", label=f"NVLink {ceiling:.0f} GB/s per direction")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size S (bytes)")
        ax.set_title(f"{label}, {world} GPUs")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("GB/s (median of reps)")
    axes[0].legend()
    fig.suptitle(f"all-reduce on {data['device']} (torch {data['torch']}, NCCL {data['nccl']})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    import torch
    import torch.multiprocessing as mp

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, default=None, help="GPUs to use (default: all)")
    parser.add_argument("--max-mib", type=float, default=1024, help="largest message in MiB (default 1024)")
    parser.add_argument("--out", type=Path, default=HERE / "answers" / "busbw_gpus.json")
    args = parser.parse_args()
    world = args.world or torch.cuda.device_count()
    if world < 2 or world > torch.cuda.device_count():
        raise SystemExit(f"needs 2 or more GPUs and at most this machine's {torch.cuda.device_count()}; "
                         f"asked for {world}")
    sizes = [s for s in SIZES if s <= args.max_mib * 2**20]
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink SHARP: rings against rings
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "records.json")
        mp.spawn(_rank, args=(world, os.path.join(tmp, "store"), sizes, REPS, out), nprocs=world)
        data = json.loads(Path(out).read_text())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    plot(data, args.out.with_suffix(".png"))
    print(f"{'impl':>5} {'bytes':>11} {'median us':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}")
    for r in rows(data["records"]):
        print(f"{r['impl']:>5} {r['bytes']:>11} {r['median_s'] * 1e6:>10.1f} {r['algbw_gbs']:>11.1f} {r['busbw_gbs']:>11.1f}")
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
