"""Figure: FlashAttention-2's causal tile grid, and the online-softmax rescale on a small example.

Sources: the tile sizes are the p6 reference's `forward_config(head_dim=128, on_gpu=True)`
(solutions/p6_flashattn/flashattn/config.py); the tile classes follow the loop bounds of its
forward kernel (forward.py: key tiles [0, lo) unmasked, [lo, lo + BLOCK_M) masked, the rest
skipped, lo = query tile start). The online softmax runs the update of that kernel's docstring
(m' = max(m, rowmax S), l' = l e^(m - m') + rowsum P, acc' = acc e^(m - m') + P V) in float64 numpy
on seeded scores of one query row. Belongs in course/stages/04-kernels.md, at the "FA forward,
per key tile" row of "Key formulas" (and the "No rescale of the running accumulator" pitfall).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.patches import Patch

from course.figures._common import DECODE, PREFILL, WAITING, pyplot, reference, save

SEQ_LEN, HEAD_DIM = 1024, 128
SEED, N_KEYS, BLOCK, V_DIM, TREND = 0, 16, 4, 2, 4.5
FULL, MASKED, SKIPPED = 0, 1, 2


def tile_grid(seq_len: int, block_m: int, block_n: int) -> np.ndarray:
    """(query tiles, key tiles) array of FULL / MASKED / SKIPPED from the causal kernel's loops."""
    n_m, n_n = -(-seq_len // block_m), -(-seq_len // block_n)
    grid = np.full((n_m, n_n), SKIPPED)
    for i in range(n_m):
        lo = i * block_m  # start of the query tile = start of the masked band
        hi = min(lo + block_m, seq_len)
        for j in range(n_n):
            start = j * block_n
            grid[i, j] = FULL if start < lo else MASKED if start < hi else SKIPPED
    return grid


def online_softmax(scores: np.ndarray, values: np.ndarray, block: int) -> dict:
    """Fold key blocks of one query row; record m, l, acc / l after each block."""
    m, l, acc = -np.inf, 0.0, np.zeros(values.shape[1])
    ms, ls, outs, rescaled, added = [], [], [], [], []
    for start in range(0, len(scores), block):
        s, v = scores[start : start + block], values[start : start + block]
        m_new = max(m, s.max())
        alpha = np.exp(m - m_new)  # exp(-inf) = 0 on the first block
        p = np.exp(s - m_new)
        rescaled.append(l * alpha)
        added.append(p.sum())
        l = l * alpha + p.sum()
        acc = acc * alpha + p @ v
        m = m_new
        ms.append(m), ls.append(l), outs.append(acc / l)
    return {"m": np.array(ms), "l": np.array(ls), "out": np.array(outs), "l_rescaled": np.array(rescaled),
            "rowsum_p": np.array(added), "o": acc / l, "lse": m + np.log(l)}


def data() -> dict:
    fa = reference("p6_flashattn", "flashattn")
    cfg = fa.forward_config(HEAD_DIM, on_gpu=True)
    rng = np.random.default_rng(SEED)
    # A rising trend makes the row max grow block after block, so every rescale is visible.
    scores = rng.normal(0.0, 1.0, N_KEYS) + np.linspace(0.0, TREND, N_KEYS)
    values = rng.normal(0.0, 1.0, (N_KEYS, V_DIM))
    return {"seq_len": SEQ_LEN, "block_m": cfg.block_m, "block_n": cfg.block_n,
            "grid": tile_grid(SEQ_LEN, cfg.block_m, cfg.block_n),
            "scores": scores, "values": values, "block": BLOCK,
            "online": online_softmax(scores, values, BLOCK)}


def _draw_grid(ax, d: dict) -> None:
    plt = pyplot()
    colors = {FULL: DECODE, MASKED: PREFILL, SKIPPED: WAITING}
    grid = d["grid"]
    for (i, j), kind in np.ndenumerate(grid):
        ax.add_patch(plt.Rectangle((j * d["block_n"], i * d["block_m"]), d["block_n"], d["block_m"],
                                   facecolor=colors[int(kind)], edgecolor="w", lw=1))
    ax.plot([0, d["seq_len"]], [0, d["seq_len"]], color="k", lw=0.8, ls="--")
    ax.set(xlim=(0, d["seq_len"]), ylim=(d["seq_len"], 0), aspect="equal",
           xlabel=f"key position (tiles of BLOCK_N = {d['block_n']})",
           ylabel=f"query position (tiles of BLOCK_M = {d['block_m']})")
    counts = [int((grid == k).sum()) for k in (FULL, MASKED, SKIPPED)]
    handles = [Patch(color=colors[k], label=n) for k, n in ((FULL, "no mask"), (MASKED, "masked"), (SKIPPED, "skipped"))]
    ax.legend(handles=handles, loc="upper right", fontsize=7)
    ax.set_title(f"causal, N = {d['seq_len']}: {counts[0]} full tiles (no mask), {counts[1]} masked,\n"
                 f"{counts[2]} skipped; one program per query row of tiles", fontsize=9)


def _draw_online(ax_s, ax_l, d: dict) -> None:
    on, b, n = d["online"], d["block"], len(d["scores"])
    blocks = np.arange(n) // b
    ax_s.bar(range(n), d["scores"], color=[f"C{k}" for k in blocks])
    ax_s.step(np.arange(0, n + 1, b), np.append(on["m"], on["m"][-1]), where="post", color="k",
              label="running max m after each block")
    ax_s.set(xlabel="key j (colour = key block)", ylabel="score s_j", title=f"one query row, key blocks of {b}")
    ax_s.legend(fontsize=7, loc="lower right")
    k = np.arange(len(on["l"]))
    ax_l.bar(k, on["l_rescaled"], color="#bbbbbb", label="l e^(m - m'): old sum, rescaled")
    ax_l.bar(k, on["rowsum_p"], bottom=on["l_rescaled"], color=[f"C{i}" for i in k], label="rowsum P of the new block")
    ax_l.set(xlabel="after key block", ylabel="running normalizer l", xticks=k,
             title=f"l' = l e^(m - m') + rowsum P, acc likewise;\nat the end o = acc / l, LSE = m + log l = {on['lse']:.4f}")
    ax_l.title.set_fontsize(9)
    ax_l.legend(fontsize=7, loc="upper left")


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig = plt.figure(figsize=(11, 4.6))
    gs = fig.add_gridspec(1, 3, width_ratios=[1.1, 1, 1])
    _draw_grid(fig.add_subplot(gs[0]), d)
    _draw_online(fig.add_subplot(gs[1]), fig.add_subplot(gs[2]), d)
    fig.suptitle("FlashAttention-2 forward: tiles [p6 reference's forward_config(128, GPU) and causal loop "
                 "bounds], and the online-softmax rescale (seeded example)", fontsize=10)
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "flash_tiling.png"))
