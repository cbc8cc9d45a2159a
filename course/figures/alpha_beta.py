"""Figure: the alpha-beta model's all-reduce times, ring against recursive doubling, over message
sizes: latency-bound small messages, bandwidth-bound large ones, and the crossover between them.

Source: the s03 reference (solutions/s03_collectives/collectives/cost.py): `ring_all_reduce_time`,
`recursive_doubling_time`, `crossover_bytes` and `bus_factor`, on the stage note's illustrative
link (alpha = 5 us, 50 GB/s). Analytic, not measured. Belongs in course/stages/03-collectives.md
(Key formulas, the crossover row).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from course.figures._common import pyplot, reference, save

ALPHA_S, BYTES_PER_S = 5e-6, 50e9
WORLDS = (4, 8)
SIZES = np.logspace(10, 30, 81, base=2)  # 1 KiB .. 1 GiB
COLOURS = {4: "#1f77b4", 8: "#d62728"}


def data() -> dict:
    cost = reference("s03_collectives", "collectives").cost
    link = cost.LinkModel.from_bandwidth(ALPHA_S, BYTES_PER_S)
    out = {"sizes": SIZES.tolist(), "alpha_s": ALPHA_S, "bytes_per_s": BYTES_PER_S, "worlds": {}}
    for n in WORLDS:
        ring = [cost.ring_all_reduce_time(s, n, link) for s in SIZES]
        rd = [cost.recursive_doubling_time(s, n, link) for s in SIZES]
        out["worlds"][n] = {"ring": ring, "doubling": rd, "crossover": cost.crossover_bytes(n, link),
                            "busbw_ring": [s / t * cost.bus_factor("all_reduce", n) for s, t in zip(SIZES, ring)]}
    return out


def _bytes_label(x: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):  # decimal, as the stage note writes them
        if x >= size:
            return f"{x / size:.2g} {unit}"
    return f"{x:.0f} B"


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    sizes = np.array(d["sizes"])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    for n, w in d["worlds"].items():
        c = COLOURS[n]
        ax.loglog(sizes, np.array(w["ring"]) * 1e6, color=c, label=f"ring, n = {n}")
        ax.loglog(sizes, np.array(w["doubling"]) * 1e6, color=c, ls="--", label=f"recursive doubling, n = {n}")
        ax.axvline(w["crossover"], color=c, lw=0.8, ls=":")
        ax.text(w["crossover"] * 1.15, 2e1 if n == 4 else 6e1, f"S* = {_bytes_label(w['crossover'])}", color=c,
                fontsize=8)
        bx.semilogx(sizes, np.array(w["busbw_ring"]) / 1e9, color=c, label=f"ring, n = {n}")
    ax.set_xlabel("message size S (bytes)")
    ax.set_ylabel("all-reduce time (us)")
    ax.set_title("time: doubling wins below S*, the ring above", fontsize=9, loc="left")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    bx.axhline(d["bytes_per_s"] / 1e9, color="k", lw=0.8, ls="--")
    bx.text(sizes[0], d["bytes_per_s"] / 1e9 * 0.93, "link bandwidth 1/beta", fontsize=8, va="top")
    bx.set_xlabel("message size S (bytes)")
    bx.set_ylabel("ring bus bandwidth (GB/s)")
    bx.set_title("busbw = S/t x 2(n-1)/n approaches 1/beta", fontsize=9, loc="left")
    bx.legend(fontsize=7, loc="center right")
    bx.grid(alpha=0.3, which="both")
    fig.suptitle(f"Alpha-beta model, alpha = {d['alpha_s'] * 1e6:.0f} us, 1/beta = {d['bytes_per_s'] / 1e9:.0f} GB/s "
                 "(illustrative, not measured) [s03 cost.py]", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "alpha_beta.png"))
