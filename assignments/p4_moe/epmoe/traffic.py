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
    raise NotImplementedError("p4.16: dispatch_counts")


def traffic_matrix(slots_per_rank: list[Tensor], placement: ExpertPlacement, row_bytes: int = 1) -> list[list[int]]:
    """slots_per_rank[s]: rank s's (T_s, k) slots -> (world x world) matrix[s][d] = rows rank s
    sends rank d times row_bytes (the diagonal stays on the rank: no link carries it)."""
    raise NotImplementedError("p4.17: traffic_matrix")


def remote_bytes(matrix: list[list[int]]) -> int:
    """Bytes that cross a link: the matrix's sum without its diagonal."""
    raise NotImplementedError("p4.18: remote_bytes")


def allgather_bytes(tokens_per_rank: list[int], row_bytes: int) -> int:
    """The all-gather baseline: each rank receives every other rank's tokens."""
    raise NotImplementedError("p4.19: allgather_bytes")


def plot_traffic(matrices: dict[str, list[list[int]]], path: str | Path) -> Path:
    """One heatmap a layer (name -> matrix of bytes, source rank by row, destination by column),
    side by side, each cell labelled in MiB; saved as PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    raise NotImplementedError("p4.20: plot_traffic")
