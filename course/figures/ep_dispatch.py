"""Figure: bytes each of 32 EP ranks sends each other rank in one MoE dispatch, with experts placed
contiguously and with 32 redundant experts placed by load (EPLB), and the bytes each rank receives.

Source: the P4 reference (solutions/p4_moe/epmoe: assign_replicas, traffic_matrix, eplb_placement)
on DeepSeek-V3's sizes (256 routed experts, top-8, hidden 7168 in bf16) over 32 ranks of 1024
tokens each, on a Zipf-skewed trace drawn here (Zipf 0.5, Gumbel top-k on torch.rand, seed 0, as
the P4 analysis draws its own). tests/test_figures.py recounts the bytes from the trace.
Belongs in course/stages/09-long-context-and-moe.md ("Capstone P4").
"""

from __future__ import annotations

from pathlib import Path

import torch

from course.figures._common import pyplot, reference, save

EXPERTS, TOP_K, ROW_BYTES = 256, 8, 7168 * 2
WORLD, TOKENS, SLOTS = 32, 1024, 9
ZIPF, SEED = 0.5, 0


def trace() -> torch.Tensor:
    """(WORLD, TOKENS, TOP_K) logical experts of every token of every rank."""
    g = torch.Generator().manual_seed(SEED)
    ranking = torch.randperm(EXPERTS, generator=g)
    popularity = torch.empty(EXPERTS)
    popularity[ranking] = (1.0 + torch.arange(EXPERTS, dtype=torch.float32)) ** -ZIPF
    u = torch.rand(WORLD, TOKENS, EXPERTS, generator=g).clamp_(1e-12, 1 - 1e-7)
    return (popularity.log() - torch.log(-torch.log(u))).topk(TOP_K, dim=-1).indices


def data() -> dict:
    reference("s09_longctx_moe", "longmoe")  # epmoe builds on stage 9's gate
    epmoe = reference("p4_moe", "epmoe")
    experts = trace()
    load = torch.bincount(experts.reshape(-1), minlength=EXPERTS).float()
    placements = {"contiguous": epmoe.contiguous_placement(EXPERTS, WORLD),
                  "EPLB": epmoe.eplb_placement(load, WORLD, SLOTS)}
    out = {"slots": {}, "matrix": {}}
    for name, placement in placements.items():
        slots = [epmoe.assign_replicas(t, placement) for t in experts]
        out["slots"][name] = [list(row) for row in placement.slots]
        out["matrix"][name] = epmoe.traffic_matrix(slots, placement, ROW_BYTES)
    return out


def received(matrix: list[list[int]]) -> list[int]:
    """Bytes each rank receives from the other ranks."""
    return [sum(row[d] for s, row in enumerate(matrix) if s != d) for d in range(len(matrix))]


def draw(d: dict, path: str | Path) -> Path:
    import numpy as np

    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), gridspec_kw={"width_ratios": [1, 1.2, 1.4]},
                             layout="constrained")
    top = max(max(max(r) for r in m) for m in d["matrix"].values()) / 2**20
    for ax, (name, matrix) in zip(axes, d["matrix"].items()):
        image = ax.imshow(np.array(matrix) / 2**20, cmap="viridis", vmin=0, vmax=top, interpolation="nearest")
        ax.set_title(f"{name}: MiB from rank s to rank d", fontsize=9, loc="left")
        ax.set_xlabel("destination rank d")
    axes[0].set_ylabel("source rank s")
    fig.colorbar(image, ax=axes[1], shrink=0.9, label="MiB")
    ax = axes[2]
    width = 0.4
    for k, (name, matrix) in enumerate(d["matrix"].items()):
        mib = [v / 2**20 for v in received(matrix)]
        ax.bar([r + (k - 0.5) * width for r in range(len(mib))], mib, width=width, color=("#9ecae1", "#fdae6b")[k],
               edgecolor="k", lw=0.3, label=f"{name} (max/mean {max(mib) / (sum(mib) / len(mib)):.2f})")
    ax.set_xlabel("rank")
    ax.set_ylabel("MiB received in one dispatch")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle("One MoE dispatch, DeepSeek-V3 sizes on 32 EP ranks, skewed routing "
                 "[P4 traffic_matrix, eplb_placement]", fontsize=10)
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "ep_dispatch.png"))
