"""Figure: where the GPU's time goes in the course's two recorded decode traces, eagerly launched
and replayed from CUDA graphs: busy time by kernel category, and idle time.

Source: the committed H200 traces datasets/profiles/p1_decode_eager.json.gz and
p1_decode_graphs.json.gz (recorded by datasets/profiles/record_profiles.py), read by the s11
reference (solutions/s11_profiling/traceprof): `load_trace`, `temporal_breakdown`,
`category_shares`, `gaps`. Measured once, committed: the figure is the same on every rebuild.
Belongs in course/stages/11-profiling.md.
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import REPO, pyplot, reference, save

TRACES = {"eager launches": "p1_decode_eager", "CUDA graphs": "p1_decode_graphs"}
PROFILES = REPO / "datasets" / "profiles"
COLOURS = {"gemm": "#1f77b4", "attention": "#9467bd", "elementwise": "#2ca02c", "memory": "#8c564b",
           "communication": "#e377c2", "other": "#7f7f7f", "idle": "#ffffff"}


def data() -> dict:
    tp = reference("s11_profiling", "traceprof")
    out = {}
    for label, name in TRACES.items():
        ev = tp.load_trace(PROFILES / f"{name}.json.gz")
        b = tp.temporal_breakdown(ev)
        gaps = tp.gaps(ev)
        out[label] = {"file": f"{name}.json.gz", "span": b.span_us, "busy": b.busy_us, "idle": b.idle_us,
                      "shares": tp.category_shares(ev), "num_gaps": len(gaps),
                      "largest_gap": max((g.dur for g in gaps), default=0.0),
                      "kernels": sum(1 for e in tp.gpu_events(ev))}
    return out


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 2.8), gridspec_kw={"width_ratios": [1.2, 1]})
    labels = list(d)
    for y, label in enumerate(labels):
        r = d[label]
        ax.barh(y, r["busy"] / 1e3, color="#1f77b4", edgecolor="k", lw=0.3)
        ax.barh(y, r["idle"] / 1e3, left=r["busy"] / 1e3, color="w", edgecolor="k", lw=0.3, hatch="//")
        ax.text(r["span"] / 1e3 + 0.5, y, f"busy {r['busy'] / 1e3:.2f} ms, idle {r['idle'] / r['span']:.0%}\n"
                f"{r['kernels']} GPU events, largest gap {r['largest_gap']:.0f} us", va="center", fontsize=7)
        left = 0.0
        for cat, share in r["shares"].items():
            if share > 0:
                bx.barh(y, share * 100, left=left, color=COLOURS[cat], edgecolor="k", lw=0.3,
                        label=cat if y == 0 else None)
                if share > 0.06:
                    bx.text(left + share * 50, y, f"{share:.0%}", ha="center", va="center", fontsize=7, color="w")
                left += share * 100
    ax.set_yticks(range(len(labels)), [f"{lab}\n({d[lab]['file']})" for lab in labels], fontsize=7.5)
    ax.set_xlim(0, max(x["span"] for x in d.values()) / 1e3 * 1.6)
    ax.set_xlabel("GPU span (ms): busy (blue), idle (hatched)")
    bx.set_yticks(range(len(labels)), [])
    bx.set_xlim(0, 100)
    bx.set_xlabel("share of GPU time by kernel category (%)")
    bx.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, 1.32))
    fig.suptitle("The course's recorded P1 decode traces (H200): the same kernels, launched one at a time or "
                 "replayed as a graph [s11 traceprof]", fontsize=9, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "trace_breakdown.png"))
