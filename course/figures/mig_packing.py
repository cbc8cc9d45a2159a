"""Figure: MIG instances on H200s, placed first-fit in arrival order against the packer's optimum:
the start rules fragment a GPU the way a buddy allocator does.

Source: the s13 reference (solutions/s13_cluster/clustersim): `h200_profiles` (from the shipped
`nvidia-smi mig -lgip` output), `MigGpu.allocate` for first fit (each request on the first GPU
with a free valid start, at its lowest start) and `pack_mig` for the optimal packing, on the
requests below over GPUS GPUs. Belongs in course/stages/13-cluster-scheduling.md ("H200 MIG
profiles").
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import pyplot, reference, save

GPUS = 2
REQUESTS = ("1g.18gb", "1g.35gb", "4g.71gb", "4g.71gb", "2g.35gb")
COLOURS = {"1g.18gb": "#c6dbef", "1g.35gb": "#9ecae1", "2g.35gb": "#6baed6", "3g.71gb": "#fd8d3c",
           "4g.71gb": "#e6550d", "7g.141gb": "#a63603", "1g.18gb+me": "#deebf7"}


def _first_fit(cs) -> dict:
    gpus = [cs.MigGpu() for _ in range(GPUS)]
    placements, unplaced = [], []
    for i, profile in enumerate(REQUESTS):
        gpu = next((g for g, m in enumerate(gpus) if m.free_starts(profile)), None)
        if gpu is None:
            unplaced.append(i)
        else:
            placements.append((i, gpu, gpus[gpu].allocate(profile, i)))
    return {"placements": placements, "unplaced": unplaced}


def data() -> dict:
    cs = reference("s13_cluster", "clustersim")
    sizes = {name: p.size for name, p in cs.h200_profiles().items()}
    best = cs.pack_mig(list(REQUESTS), GPUS)
    return {"sizes": sizes, "first fit": _first_fit(cs),
            "optimal (pack_mig)": {"placements": list(best.placements), "unplaced": list(best.unplaced)}}


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    from matplotlib.patches import Rectangle

    runs = [k for k in d if k != "sizes"]
    fig, axes = plt.subplots(1, len(runs), figsize=(10, 2.6), sharey=True)
    for ax, name in zip(axes, runs):
        run = d[name]
        for i, gpu, start in run["placements"]:
            profile = REQUESTS[i]
            y = GPUS - 1 - gpu
            ax.add_patch(Rectangle((start, y - 0.38), d["sizes"][profile] - 0.06, 0.76, fc=COLOURS[profile], ec="k"))
            ax.text(start + d["sizes"][profile] / 2, y, f"r{i}\n{profile}", ha="center", va="center", fontsize=6.5)
        left = ", ".join(f"r{i} {REQUESTS[i]}" for i in run["unplaced"]) or "none"
        ax.set_title(f"{name}: left out {left}", fontsize=8.5, loc="left")
        ax.set_xlim(0, 8)
        ax.set_ylim(-0.6, GPUS - 0.4)
        ax.set_xticks(range(9))
        ax.set_xlabel("memory slice (8 per H200)")
        ax.grid(axis="x", alpha=0.4)
    axes[0].set_yticks(range(GPUS), [f"GPU {g}" for g in reversed(range(GPUS))])
    fig.suptitle(f"Requests r0..r{len(REQUESTS) - 1} in arrival order: " + ", ".join(REQUESTS) + " [s13 MigGpu, pack_mig]",
                 fontsize=9, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "mig_packing.png"))
