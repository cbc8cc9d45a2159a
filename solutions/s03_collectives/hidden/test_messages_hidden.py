"""Four ranks: each algorithm sends the messages its pattern needs, counted by wrapping
torch.distributed's send and isend (and the package's own aliases of them) around each call. Right
sums from the wrong pattern (everything to one rank and back, the whole vector around the ring)
miss the point of the exercise and the cost the model assigns it."""

from __future__ import annotations

import pytest
from conftest import sends_recorded

N = 1003  # chunk_sizes(1003, 4) == [251, 251, 251, 250]: the remainder spread over the first blocks
SPLITS = [[1, 2, 3, 4], [5, 6, 7, 8], [2, 4, 6, 8], [3, 1, 4, 1]]


def messages_on_rank() -> dict:
    import torch
    import torch.distributed as dist
    from collectives import all_to_all, recursive_doubling_all_reduce, ring_all_reduce

    rank = dist.get_rank()
    out = {}
    for name, call in (("ring", lambda: ring_all_reduce(torch.ones(N))),
                       ("recursive_doubling", lambda: recursive_doubling_all_reduce(torch.ones(N))),
                       ("all_to_all", lambda: all_to_all(torch.ones(sum(SPLITS[rank])), SPLITS[rank],
                                                         [SPLITS[s][rank] for s in range(4)]))):
        records: list = []
        with sends_recorded(records):
            call()
        out[name] = records
    return out


@pytest.mark.points(3)
@pytest.mark.world_size(4)
def test_each_algorithm_sends_the_messages_of_its_pattern(ranks):
    for rank, sent in enumerate(ranks.run(messages_on_rank)):
        ring = sent["ring"]
        peers = {peer for peer, _ in ring}
        assert len(ring) == 6 and len(peers) == 1 and peers <= {(rank + 1) % 4, (rank - 1) % 4}, (
            f"ring_all_reduce, rank {rank}: sent {ring} ([peer, elements] per message); a ring all-reduce on 4 "
            "ranks sends 2 (n - 1) = 6 messages, all to one neighbour")
        assert all(numel in (250, 251) for _, numel in ring), (
            f"ring_all_reduce, rank {rank}: sent {ring}; each message is one block of chunk_sizes(1003, 4) = "
            "[251, 251, 251, 250] elements")
        doubling = sent["recursive_doubling"]
        assert sorted(doubling) == sorted([[rank ^ 1, N], [rank ^ 2, N]]), (
            f"recursive_doubling_all_reduce, rank {rank}: sent {doubling}; on 4 ranks it sends the whole vector "
            f"({N} elements) once to rank {rank ^ 1} and once to rank {rank ^ 2}")
        exchanged = sorted(sent["all_to_all"])
        want = sorted([d, SPLITS[rank][d]] for d in range(4) if d != rank)
        assert exchanged == want, (
            f"all_to_all, rank {rank}: sent {exchanged}; each other rank gets one message of its rows {want} "
            "(the own block is copied locally)")
