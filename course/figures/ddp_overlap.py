"""Figure: DDP's bucketed all-reduces against the backward pass of GPT-2 small on 8 ranks, in fp32
with a 25 MiB cap: which buckets hide behind the backward and which one is exposed.

Source: the s07 reference's `bucket_assignment` (solutions/s07_training/trainfw/buckets.py) on
GPT-2 small's parameters in registration order (solutions/s07_training/analysis.py). A toy time
model, stated in the figure: the backward spends time proportional to each parameter's elements and
makes its gradients ready in reverse registration order; each bucket's ring all-reduce takes time
proportional to its bytes, COMM_RATIO of the backward's time in all; buckets launch in bucket
order, one at a time, as soon as their last gradient is ready. Belongs in
course/stages/07-training-frameworks.md ("Why bucketing overlaps").
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from course.figures._common import SOLUTIONS, pyplot, reference, save

CAP_MIB, BYTES, COMM_RATIO = 25, 4, 0.6
COLOURS = ("#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb")


def _numels() -> list[int]:
    path = SOLUTIONS / "s07_training" / "analysis.py"
    spec = importlib.util.spec_from_file_location("s07_training_analysis", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.gpt2_small_numels()


def data() -> dict:
    trainfw = reference("s07_training", "trainfw")
    numels = _numels()
    sizes = [n * BYTES for n in numels]
    buckets = trainfw.bucket_assignment(sizes, CAP_MIB * 2**20)
    total = sum(numels)
    ready, t = {}, 0.0  # backward: reverse registration order, time in units of the whole backward
    for i in range(len(numels) - 1, -1, -1):
        t += numels[i] / total
        ready[i] = t
    comm_free, spans = 0.0, []
    for b in buckets:
        start = max(max(ready[i] for i in b), comm_free)
        dur = COMM_RATIO * sum(sizes[i] for i in b) / sum(sizes)
        spans.append({"start": start, "dur": dur, "mib": sum(sizes[i] for i in b) / 2**20,
                      "compute_from": min(ready[i] - numels[i] / total for i in b), "compute_to": max(ready[i] for i in b)})
        comm_free = start + dur
    return {"spans": spans, "backward_end": 1.0, "step_end": comm_free, "buckets": len(buckets)}


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 2.6))
    for k, s in enumerate(d["spans"]):
        colour = COLOURS[k % len(COLOURS)]
        ax.barh(1, s["compute_to"] - s["compute_from"], left=s["compute_from"], height=0.6, color=colour,
                edgecolor="k", lw=0.4)
        ax.barh(0, s["dur"], left=s["start"], height=0.6, color=colour, edgecolor="k", lw=0.4)
        if s["dur"] > 0.05:
            ax.text(s["start"] + s["dur"] / 2, 0, f"b{k}\n{s['mib']:.0f} MiB", ha="center", va="center", fontsize=7)
    ax.axvline(d["backward_end"], color="k", ls="--", lw=0.8)
    ax.axvspan(d["backward_end"], d["step_end"], color="#d62728", alpha=0.12)
    ax.text(d["backward_end"] + 0.01, 1.45, f"exposed: {d['step_end'] - d['backward_end']:.2f}", fontsize=8)
    ax.set_yticks([0, 1], ["all-reduce", "backward"])
    ax.set_ylim(-0.6, 1.7)
    ax.set_xlabel(f"time, in units of the backward pass (all-reduces in all: {COMM_RATIO} of it; toy model)")
    ax.set_title(f"GPT-2 small, fp32, {CAP_MIB} MiB buckets: {d['buckets']} all-reduces, launched in bucket order "
                 "as each fills [s07 bucket_assignment]", fontsize=9, loc="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "ddp_overlap.png"))
