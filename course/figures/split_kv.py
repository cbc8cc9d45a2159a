"""Figure: split-KV decode attention over a paged cache: the block table sends each token to its
physical block, the context is cut into splits that separate programs attend to, and the splits'
outputs merge exactly by their log-sum-exps.

Source: the s04 reference's `num_splits_for` (solutions/s04_kernels/tritonkernels/paged_decode.py)
for the number of splits; the splits' (out_s, lse_s) and their merge are computed here in fp64
torch by the stage note's formulas (the reference's kernels are Triton and need a GPU), on one
seeded query head over a seeded block table. Tests check the merge against plain softmax
attention. Belongs in course/stages/04-kernels.md (the split-KV rows of Key formulas).
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from course.figures._common import pyplot, reference, save

BLOCK_SIZE, CONTEXT, SPLIT_TOKENS, NUM_BLOCKS, HEAD_DIM, SEED = 16, 112, 32, 12, 8, 0
SPLIT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")


def data() -> dict:
    reference("s04_kernels", "tritonkernels")
    from tritonkernels.paged_decode import num_splits_for  # the package exports the function, not the module
    rng = random.Random(SEED)
    blocks_needed = -(-CONTEXT // BLOCK_SIZE)
    table = rng.sample(range(NUM_BLOCKS), blocks_needed)  # physical block of each logical block
    splits = num_splits_for(torch.zeros(1, blocks_needed), BLOCK_SIZE, SPLIT_TOKENS)
    g = torch.Generator().manual_seed(SEED)
    q = torch.randn(HEAD_DIM, generator=g, dtype=torch.float64)
    k = torch.randn(CONTEXT, HEAD_DIM, generator=g, dtype=torch.float64) * 1.5
    v = torch.randn(CONTEXT, HEAD_DIM, generator=g, dtype=torch.float64)
    scores = k @ q / HEAD_DIM**0.5
    outs, lses = [], []
    for s in range(splits):  # tokens [s T, min((s + 1) T, context)); an empty split has lse -inf
        lo, hi = s * SPLIT_TOKENS, min((s + 1) * SPLIT_TOKENS, CONTEXT)
        if lo >= hi:
            outs.append(torch.zeros(HEAD_DIM, dtype=torch.float64))
            lses.append(float("-inf"))
            continue
        outs.append(torch.softmax(scores[lo:hi], 0) @ v[lo:hi])
        lses.append(float(torch.logsumexp(scores[lo:hi], 0)))
    lse_s = torch.tensor(lses, dtype=torch.float64)
    lse = torch.logsumexp(lse_s, 0)
    weights = torch.exp(lse_s - lse)
    merged = (weights[:, None] * torch.stack(outs)).sum(0)
    return {"table": table, "splits": splits, "scores": scores.numpy(), "lse_s": lses, "lse": float(lse),
            "weights": weights.tolist(), "merged": merged.numpy(), "q": q, "k": k, "v": v}


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    from matplotlib.patches import Rectangle

    fig, (ax, bx) = plt.subplots(2, 1, figsize=(10, 4.3), gridspec_kw={"height_ratios": [1, 1.1]})
    for logical, physical in enumerate(d["table"]):
        first = logical * BLOCK_SIZE
        split = first // SPLIT_TOKENS
        used = min(BLOCK_SIZE, CONTEXT - first)
        colour = SPLIT_COLOURS[split % len(SPLIT_COLOURS)]
        ax.add_patch(Rectangle((first, 1), used, 0.8, fc=colour, ec="k", alpha=0.8))
        ax.text(first + BLOCK_SIZE / 2, 1.4, f"logical {logical}", ha="center", va="center", fontsize=7)
        ax.add_patch(Rectangle((physical * BLOCK_SIZE, -0.2), used, 0.8, fc=colour, ec="k", alpha=0.8))
        ax.text(physical * BLOCK_SIZE + BLOCK_SIZE / 2, 0.2, f"#{physical}", ha="center", va="center", fontsize=7)
        ax.annotate("", (physical * BLOCK_SIZE + BLOCK_SIZE / 2, 0.62), (first + BLOCK_SIZE / 2, 0.98),
                    arrowprops={"arrowstyle": "->", "lw": 0.6})
    ax.set_xlim(0, NUM_BLOCKS * BLOCK_SIZE)
    ax.set_ylim(-0.3, 2.1)
    ax.set_yticks([0.2, 1.4], ["KV pool\n(physical)", "context\n(logical)"], fontsize=8)
    ax.set_xlabel("token / slot")
    ax.set_title(f"block table {d['table']} (blocks of {BLOCK_SIZE}); colour: split of {SPLIT_TOKENS} tokens "
                 f"({d['splits']} splits, one program each)", fontsize=8.5, loc="left")
    t = np.arange(CONTEXT)
    bx.bar(t, d["scores"], color=[SPLIT_COLOURS[(i // SPLIT_TOKENS) % len(SPLIT_COLOURS)] for i in t], width=1.0)
    for s, (lse_s, w) in enumerate(zip(d["lse_s"], d["weights"])):
        if np.isfinite(lse_s):
            mid = min((s + 0.5) * SPLIT_TOKENS, (s * SPLIT_TOKENS + CONTEXT) / 2)
            bx.text(mid, max(d["scores"]) * 1.05, f"lse_{s} = {lse_s:.2f}\nweight {w:.3f}", ha="center", fontsize=7.5)
    bx.set_xlim(0, CONTEXT)
    bx.set_ylim(min(d["scores"]) * 1.1, max(d["scores"]) * 1.6)
    bx.set_xlabel("context position")
    bx.set_ylabel("score q.k / sqrt(d)")
    bx.set_title(f"out = sum_s e^(lse_s - lse) out_s with lse = {d['lse']:.2f}: equal to one softmax over "
                 "all keys", fontsize=8.5, loc="left")
    fig.suptitle("Split-KV paged decode (one query head, seeded) [s04 paged_decode]", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "split_kv.png"))
