"""Dispatch traffic, counted in the judge from the slots it drew: rows each rank sends each rank,
bytes that cross a link, the all-gather baseline; and the per-layer diagram as a PNG."""

from __future__ import annotations

import pytest
import torch
from epmoe import ExpertPlacement, allgather_bytes, dispatch_counts, remote_bytes, traffic_matrix

from autograder.testing import in_worker

pytestmark = pytest.mark.kernels()  # plain torch, no Triton kernel

PLACEMENT_SLOTS = ((0, 1, 2), (3, 4, 5), (6, 7, 0))  # expert 0 twice: slots 0 and 8


def drawn_slots(seed: int, tokens: list[int]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.stack([torch.randperm(9, generator=g)[:2] for _ in range(t)]) if t else torch.zeros(0, 2, dtype=torch.int64)
            for t in tokens]


@pytest.mark.points(2)
def test_traffic_matrix_counts_rows_between_ranks():
    placement = ExpertPlacement(8, PLACEMENT_SLOTS)
    slots = drawn_slots(1, [6, 0, 11])
    want = [[int(((s // 3) == d).sum()) * 14336 for d in range(3)] for s in slots]
    assert dispatch_counts(slots[2], placement) == [v // 14336 for v in want[2]]
    got = traffic_matrix(slots, placement, row_bytes=14336)
    assert got == want, f"matrix {got}, want {want} (row s: what rank s sends each rank, bytes)"
    assert remote_bytes(want) == sum(want[s][d] for s in range(3) for d in range(3) if s != d)


def test_allgather_baseline_gives_every_rank_every_other_token():
    assert allgather_bytes([6, 0, 11], 100) == (0 + 11) * 100 + (6 + 11) * 100 + (6 + 0) * 100


@in_worker
def diagram_png(matrices: dict) -> bytes:
    """In the worker: the package draws into its own temporary folder; the bytes come back."""
    import tempfile
    from pathlib import Path

    from epmoe import plot_traffic

    with tempfile.TemporaryDirectory() as folder:
        path = plot_traffic(matrices, Path(folder) / "traffic.png")
        return Path(path).read_bytes()


def test_plot_traffic_writes_one_png():
    slots = drawn_slots(2, [4, 5, 6])
    m = [[int(((s // 3) == d).sum()) * 2**20 for d in range(3)] for s in slots]
    data = diagram_png({"layer 0": m, "layer 1": [row[::-1] for row in m]})
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "plot_traffic must write a PNG file"
