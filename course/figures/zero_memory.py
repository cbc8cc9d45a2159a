"""Figure: model states per GPU (weights, gradients, optimizer) of Llama-3-8B trained with
mixed-precision Adam under plain data parallelism and ZeRO-1/2/3, on 8 and 64 data-parallel GPUs.

Source: the s02 reference's memory model (solutions/s02_parallel/parallel/memory.py,
`memory_per_rank`: bf16 weights and gradients, an fp32 master copy and two fp32 moments, K = 12;
ZeRO shards over dp, ceil(N / dp) each) on datasets/model_configs/llama-3-8b.json; activations are
left out (ZeRO does not touch them). The bars are the ZeRO paper's 2Ψ + 2Ψ + KΨ with the sharded
terms divided by N. Belongs in course/stages/07-training-frameworks.md ("ZeRO's memory, derived").
"""

from __future__ import annotations

import json
from pathlib import Path

from course.figures._common import REPO, pyplot, reference, save

CONFIG = REPO / "datasets" / "model_configs" / "llama-3-8b.json"
DP_SIZES, STAGES = (8, 64), (0, 1, 2, 3)
PARTS = (("weights", "#1f77b4"), ("gradients", "#ff7f0e"), ("optimizer", "#2ca02c"))
GB = 1e9


def data() -> dict:
    par = reference("s02_parallel", "parallel")
    config = json.loads(CONFIG.read_text())
    out = {"params": par.parameters_per_rank(config, par.TrainingPlan()), "bars": {}}
    for dp in DP_SIZES:
        for stage in STAGES:
            m = par.memory_per_rank(config, par.TrainingPlan(dp=dp, zero_stage=stage))
            out["bars"][(dp, stage)] = {"weights": m.weights, "gradients": m.gradients, "optimizer": m.optimizer}
    return out


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(DP_SIZES), figsize=(10, 3.2), sharey=True)
    for ax, dp in zip(axes, DP_SIZES):
        for x, stage in enumerate(STAGES):
            bottom = 0.0
            for part, colour in PARTS:
                gb = d["bars"][(dp, stage)][part] / GB
                ax.bar(x, gb, bottom=bottom, color=colour, edgecolor="k", lw=0.4, label=part if x == 0 else None)
                bottom += gb
            ax.text(x, bottom + 2, f"{bottom:.1f}", ha="center", fontsize=8)
        ax.set_xticks(range(len(STAGES)), ["plain DP", "ZeRO-1", "ZeRO-2", "ZeRO-3"])
        ax.set_title(f"N = {dp} data-parallel GPUs", fontsize=9, loc="left")
        ax.grid(axis="y", alpha=0.3)
        ax.set_ylim(0, 145)
    axes[0].set_ylabel("GB per GPU (weights, grads, Adam)")
    axes[0].legend(fontsize=8, loc="upper right")
    fig.suptitle(f"Llama-3-8B ({d['params'] / 1e9:.2f}B parameters), bf16 + fp32 Adam (16 bytes a parameter): "
                 "model states per GPU [s02 memory_per_rank]", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "zero_memory.png"))
