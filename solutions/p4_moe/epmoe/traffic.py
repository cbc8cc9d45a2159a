"""What dispatch moves: rows and bytes between each pair of ranks, and the per-layer diagram.

matrix[s][d]: rows (or bytes) rank s sends rank d in one dispatch (combine sends the same amounts
back, d to s). The all-gather baseline gives every rank every other rank's tokens:
world * (world - 1) * T rows for T tokens a rank, whatever the routing.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from epmoe.placement import ExpertPlacement


def dispatch_counts(slots: Tensor, placement: ExpertPlacement) -> list[int]:
    """slots (T, k) physical slot ids of one rank's tokens -> rows it sends each rank (one row per
    (token, choice), its own rank included), as dispatch sends them."""
    # BEGIN SOLUTION
    dest = slots.reshape(-1) // placement.slots_per_rank
    return torch.bincount(dest, minlength=placement.world).tolist()
    # END SOLUTION


def traffic_matrix(slots_per_rank: list[Tensor], placement: ExpertPlacement, row_bytes: int = 1) -> list[list[int]]:
    """slots_per_rank[s]: rank s's (T_s, k) slots -> (world x world) matrix[s][d] = rows rank s
    sends rank d times row_bytes (the diagonal stays on the rank: no link carries it)."""
    # BEGIN SOLUTION
    return [[c * row_bytes for c in dispatch_counts(slots, placement)] for slots in slots_per_rank]
    # END SOLUTION


def remote_bytes(matrix: list[list[int]]) -> int:
    """Bytes that cross a link: the matrix's sum without its diagonal."""
    # BEGIN SOLUTION
    return sum(v for s, row in enumerate(matrix) for d, v in enumerate(row) if s != d)
    # END SOLUTION


def allgather_bytes(tokens_per_rank: list[int], row_bytes: int) -> int:
    """The all-gather baseline: each rank receives every other rank's tokens."""
    # BEGIN SOLUTION
    total = sum(tokens_per_rank)
    return sum((total - t) * row_bytes for t in tokens_per_rank)
    # END SOLUTION


def plot_traffic(matrices: dict[str, list[list[int]]], path: str | Path) -> Path:
    """One heatmap a layer (name -> matrix of bytes, source rank by row, destination by column),
    side by side, each cell labelled in MiB; saved as PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # BEGIN SOLUTION
    cols = min(2, len(matrices))
    rows = -(-len(matrices) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.4 * rows), squeeze=False)
    top = max(max(max(row) for row in m) for m in matrices.values()) / 2**20  # one colour scale for all
    for ax, (name, matrix) in zip(axes.flat, matrices.items()):
        mib = torch.tensor(matrix, dtype=torch.float64) / 2**20
        image = ax.imshow(mib.numpy(), cmap="viridis", vmin=0, vmax=top or 1)
        if len(matrix) <= 8:  # small worlds: the number in each cell
            for s in range(len(matrix)):
                for d in range(len(matrix)):
                    ax.text(d, s, f"{float(mib[s, d]):.1f}", ha="center", va="center", fontsize=7, color="w")
        ax.set_title(f"{name}: dispatch MiB, source -> destination (combine sends it back)", fontsize=8)
        ax.set_xlabel("destination rank")
        ax.set_ylabel("source rank")
        fig.colorbar(image, ax=ax, shrink=0.8, label="MiB")
    for ax in list(axes.flat)[len(matrices):]:
        ax.axis("off")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
    # END SOLUTION
