"""Figure: where Megatron's conjugate operators f and g sit in a tensor-parallel MLP, and which
collective each one runs forward and backward.

Source: the s02 reference (solutions/s02_parallel/parallel/tensor_parallel.py): its
`ColumnParallelLinear` -> SiLU -> `RowParallelLinear` run on two ranks (threads of one process,
course/figures/_fakedist.py standing in for torch.distributed and logging every collective), a
forward and a backward. The figure's labels are the logged calls; tests check the outputs and
input gradients against one unsplit process. Belongs in course/stages/02-parallel-strategies.md
(the column/row-parallel rows of Key formulas).
"""

from __future__ import annotations

from pathlib import Path

import torch

from course.figures import _fakedist
from course.figures._common import pyplot, reference, save

WORLD, TOKENS, HIDDEN, FFN, SEED = 2, 4, 8, 16, 0
RANK_COLOURS = ("#c6dbef", "#fdd0a2")


def weights() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(SEED)
    return {"x": torch.randn(TOKENS, HIDDEN, generator=g, dtype=torch.float64),
            "w1": torch.randn(FFN, HIDDEN, generator=g, dtype=torch.float64) / HIDDEN**0.5,
            "w2": torch.randn(HIDDEN, FFN, generator=g, dtype=torch.float64) / FFN**0.5,
            "dy": torch.randn(TOKENS, HIDDEN, generator=g, dtype=torch.float64)}


def _rank_step(par, w: dict, fake: _fakedist.FakeDist, rank: int) -> dict:
    col = par.ColumnParallelLinear(w["w1"], None)
    row = par.RowParallelLinear(w["w2"], None, input_is_parallel=True)
    x = w["x"].clone().requires_grad_()
    fake.phase = "forward"  # both ranks set the same label before their first collective
    y = row(torch.nn.functional.silu(col(x)))
    fake._barrier.wait()
    fake.phase = "backward"
    y.backward(w["dy"])
    fake._barrier.wait()
    return {"y": y.detach(), "dx": x.grad.detach(), "w1_rows": par.shard_range(FFN, rank, WORLD),
            "w2_cols": par.shard_range(FFN, rank, WORLD)}


def data() -> dict:
    par = reference("s02_parallel", "parallel")
    w = weights()
    results, fake = _fakedist.run(WORLD, [par.tensor_parallel], lambda f, r: _rank_step(par, w, f, r))
    calls = [(c.phase, c.rank, c.op, c.shape) for c in fake.calls]
    return {"weights": w, "ranks": results, "calls": sorted(calls)}


def _box(ax, x: float, y: float, w: float, h: float, text: str, colour: str, **kw) -> None:
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", fc=colour, ec="k", lw=0.8))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=kw.get("fontsize", 8))


def _arrow(ax, x0: float, y0: float, x1: float, y1: float) -> None:
    ax.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "->", "lw": 0.8})


def _calls_text(calls, phase: str) -> str:
    mine = [(op, shape) for p, r, op, shape in calls if p == phase and r == 0]
    if not mine:
        return "no collective"
    return ", ".join(f"{op} {tuple(shape)}" for op, shape in mine)


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.2))
    ax.set_xlim(0, 10.4)
    ax.set_ylim(-0.2, 4.4)
    ax.axis("off")
    lanes = {0: 2.6, 1: 0.9}
    for rank, y in lanes.items():
        lo, hi = d["ranks"][rank]["w1_rows"]
        ax.text(0.05, y + 0.35, f"rank {rank}", fontsize=9, weight="bold")
        _box(ax, 0.9, y, 1.0, 0.7, f"X\n{TOKENS}x{HIDDEN}\n(whole)", "white")
        _box(ax, 3.1, y, 1.5, 0.7, f"W1[{lo}:{hi}, :]\ncolumn-parallel", RANK_COLOURS[rank])
        _box(ax, 4.9, y, 0.9, 0.7, "SiLU\n(local)", RANK_COLOURS[rank])
        _box(ax, 6.1, y, 1.5, 0.7, f"W2[:, {lo}:{hi}]\nrow-parallel", RANK_COLOURS[rank])
        _box(ax, 9.2, y, 1.0, 0.7, f"Y\n{TOKENS}x{HIDDEN}\n(whole)", "white")
        for x0, x1 in ((1.9, 2.2), (2.8, 3.1), (4.6, 4.9), (5.8, 6.1), (7.6, 7.9), (8.8, 9.2)):
            _arrow(ax, x0, y + 0.35, x1, y + 0.35)
    _box(ax, 2.2, 0.7, 0.6, 2.8, "f", "#e5f5e0", fontsize=14)
    _box(ax, 7.9, 0.7, 0.9, 2.8, "g", "#fee0d2", fontsize=14)
    calls = d["calls"]
    ax.text(2.5, 3.75, "f: forward identity\nbackward: " + _calls_text(calls, "backward") + " of dX",
            ha="center", va="bottom", fontsize=8)
    ax.text(8.35, 3.75, "g: forward " + _calls_text(calls, "forward") + " of Y"
            + "\nbackward: identity", ha="center", va="bottom", fontsize=8)
    fwd = sum(1 for c in calls if c[0] == "forward" and c[1] == 0)
    bwd = sum(1 for c in calls if c[0] == "backward" and c[1] == 0)
    ax.text(0.05, 0.05, f"logged per rank: {fwd} collective forward, {bwd} backward (the s02 reference on "
            f"{WORLD} ranks; Y and dX equal one unsplit process)", fontsize=8)
    fig.suptitle("Tensor-parallel MLP: f before the column-parallel layer, g after the row-parallel one "
                 "[s02 tensor_parallel]", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "tp_fg.png"))
