"""Two ranks, large tensors: 2**22 + 3 int64 elements (32 MiB) through both all-reduces, and an
all-gather and an all-to-all of about 8 MiB each, exact against the tags recomputed here."""

from __future__ import annotations

import pytest
import torch
from conftest import check_sum, expected_sum, sum_input

N = 2**22 + 3  # odd: the ring's two blocks differ by one element
ROWS = [2**19 + 1, 2**19 - 5]  # all-gather shards of ~4 MiB each (int64)
SPLITS = [[3 * 2**18, 2**19 + 7], [2**19 - 3, 2**18]]  # SPLITS[s][d]: rows rank s sends rank d
BIG = 10**8  # wide tags: row j of rank r is r * BIG + j; all-to-all row k from s to d: s * BIG**2 + d * BIG + k


def large_on_rank() -> list:
    import torch.distributed as dist
    from collectives import all_to_all, recursive_doubling_all_reduce, ring_all_gather, ring_all_reduce

    rank = dist.get_rank()
    ring = ring_all_reduce(sum_input("int", rank, (N,)))
    doubling = recursive_doubling_all_reduce(sum_input("int", rank, (N,)))
    gathered = ring_all_gather(rank * BIG + torch.arange(ROWS[rank], dtype=torch.int64), ROWS)
    send = SPLITS[rank]
    recv = [SPLITS[0][rank], SPLITS[1][rank]]
    x = torch.cat([rank * BIG**2 + d * BIG + torch.arange(k, dtype=torch.int64) for d, k in enumerate(send)])
    return [ring, doubling, gathered, all_to_all(x, send, recv)]


def check_wide(got: torch.Tensor, want: torch.Tensor, where: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, f"{where}: got {tuple(got.shape)} {got.dtype}"
    bad = (got != want).nonzero().flatten()
    if len(bad):
        j = int(bad[0])
        v, w = int(got[j]), int(want[j])
        raise AssertionError(f"{where}: {len(bad)} rows wrong; row {j} holds {v} (source {v // BIG}, row "
                             f"{v % BIG}), expected {w} (source {w // BIG}, row {w % BIG})")


@pytest.mark.points(3)
@pytest.mark.world_size(2)
def test_large_tensors_are_exact(ranks):
    want = expected_sum(2, (N,))
    gathered_want = torch.cat([r * BIG + torch.arange(ROWS[r], dtype=torch.int64) for r in range(2)])
    for rank, (ring, doubling, gathered, exchanged) in enumerate(ranks.run(large_on_rank)):
        check_sum(ring, want, 2, f"ring_all_reduce of {N} int64, rank {rank}")
        check_sum(doubling, want, 2, f"recursive_doubling_all_reduce of {N} int64, rank {rank}")
        check_wide(gathered, gathered_want, f"ring_all_gather of {ROWS} rows, rank {rank}")
        parts = [s * BIG**2 + rank * BIG + torch.arange(SPLITS[s][rank], dtype=torch.int64) for s in range(2)]
        check_wide(exchanged, torch.cat(parts), f"all_to_all, rank {rank} (source = sender * {BIG} + receiver)")
