"""Figure: which (query, key) pairs of a causal attention each of 4 ring-attention ranks computes,
with contiguous and with zigzag shards, and the work per rank.

Source: the s09 reference's `shard_positions` (solutions/s09_longctx_moe/longmoe/ring.py) for 32
tokens over 4 ranks (the mask maps), and for 131072 tokens over 8 ranks (the work bars: a query at
position p sees p + 1 keys); tests/test_figures.py checks the work against its closed form.
Belongs in course/stages/09-long-context-and-moe.md ("Zigzag shards balance a causal ring").
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import pyplot, reference, save

SMALL, SMALL_WORLD = 32, 4           # the mask maps
LONG, LONG_WORLD = 131072, 8         # the work bars
LAYOUTS = ("contiguous", "zigzag")
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")


def data() -> dict:
    longmoe = reference("s09_longctx_moe", "longmoe")
    owner = {layout: [0] * SMALL for layout in LAYOUTS}
    work = {}
    for layout in LAYOUTS:
        for r in range(SMALL_WORLD):
            for p in longmoe.shard_positions(SMALL, r, SMALL_WORLD, layout).tolist():
                owner[layout][p] = r
        work[layout] = [int((longmoe.shard_positions(LONG, r, LONG_WORLD, layout) + 1).sum())
                        for r in range(LONG_WORLD)]
    return {"owner": owner, "work": work}


def draw(d: dict, path: str | Path) -> Path:
    import numpy as np
    from matplotlib.colors import ListedColormap

    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), gridspec_kw={"width_ratios": [1, 1, 1.3]})
    cmap = ListedColormap(["white", *COLOURS])
    for ax, layout in zip(axes, LAYOUTS):
        grid = np.zeros((SMALL, SMALL))
        for q in range(SMALL):
            grid[q, : q + 1] = d["owner"][layout][q] + 1  # the row's rank computes these pairs
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=len(COLOURS), interpolation="nearest")
        ax.set_title(f"{layout}: rank of each query row", fontsize=9, loc="left")
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
    ax = axes[2]
    width = 0.4
    for k, layout in enumerate(LAYOUTS):
        mean = sum(d["work"][layout]) / LONG_WORLD
        ax.bar([r + (k - 0.5) * width for r in range(LONG_WORLD)], [w / mean for w in d["work"][layout]],
               width=width, label=f"{layout} (max/mean {max(d['work'][layout]) / mean:.3f})",
               color=("#9ecae1", "#fdae6b")[k], edgecolor="k", lw=0.4)
    ax.set_xlabel(f"rank ({LONG} tokens over {LONG_WORLD} ranks)")
    ax.set_ylabel("causal (query, key) pairs / mean")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Causal ring attention: contiguous shards leave the last rank with most of the work "
                 "[s09 shard_positions]", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "zigzag_balance.png"))
