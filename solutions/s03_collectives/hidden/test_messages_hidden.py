"""Four ranks: each algorithm sends the messages its pattern needs, counted by wrapping
torch.distributed's send and isend (and the package's own aliases of them) around each call. Right
sums from the wrong pattern (everything to one rank and back, the whole vector around the ring)
miss the point of the exercise and the cost the model assigns it.

Each rank's inputs are drawn by the judge and sent to that rank only, and the spy keeps a copy of
every payload: the judge decodes each message into the ranks' inputs summed in it, so messages of
the right sizes that carry anything else (decoys beside a side channel) fail as a wrong pattern."""

from __future__ import annotations

import pytest
import torch
from conftest import secret_inputs, sends_recorded, sources_of

N = 1003  # chunk_sizes(1003, 4) == [251, 251, 251, 250]: the remainder spread over the first blocks
RING_BLOCKS = [251, 251, 251, 250]
SPLITS = [[1, 2, 3, 4], [5, 6, 7, 8], [2, 4, 6, 8], [3, 1, 4, 1]]


def messages_on_rank(inputs: list) -> dict:
    """inputs: this rank's [ring, recursive doubling, all-to-all] inputs (the judge's draws). Each
    algorithm's sends: [peer, elements, the payload]."""
    import torch.distributed as dist
    from collectives import all_to_all, recursive_doubling_all_reduce, ring_all_reduce

    rank = dist.get_rank()
    ring_x, doubling_x, a2a_x = (x.clone() for x in inputs)
    out = {}
    for name, call in (("ring", lambda: ring_all_reduce(ring_x)),
                       ("recursive_doubling", lambda: recursive_doubling_all_reduce(doubling_x)),
                       ("all_to_all", lambda: all_to_all(a2a_x, SPLITS[rank], [SPLITS[s][rank] for s in range(4)]))):
        records: list = []
        with sends_recorded(records, payloads=True):
            call()
        out[name] = records
    return out


@pytest.mark.points(3)
@pytest.mark.world_size(4)
def test_each_algorithm_sends_the_messages_of_its_pattern(ranks):
    ring_in, doubling_in = secret_inputs(4, [N] * 4), secret_inputs(4, [N] * 4)
    a2a_in = secret_inputs(4, [sum(SPLITS[r]) for r in range(4)])
    outs = ranks.run_each(messages_on_rank, [[ring_in[r], doubling_in[r], a2a_in[r]] for r in range(4)])
    for rank, sent in enumerate(outs):
        ring = [[peer, numel] for peer, numel, _ in sent["ring"]]
        peers = {peer for peer, _ in ring}
        assert len(ring) == 6 and len(peers) == 1 and peers <= {(rank + 1) % 4, (rank - 1) % 4}, (
            f"ring_all_reduce, rank {rank}: sent {ring} ([peer, elements] per message); a ring all-reduce on 4 "
            "ranks sends 2 (n - 1) = 6 messages, all to one neighbour")
        assert all(numel in (250, 251) for _, numel in ring), (
            f"ring_all_reduce, rank {rank}: sent {ring}; each message is one block of chunk_sizes(1003, 4) = "
            "[251, 251, 251, 250] elements")
        check_ring_payloads(rank, sent["ring"], ring_in)
        doubling = [[peer, numel] for peer, numel, _ in sent["recursive_doubling"]]
        assert sorted(doubling) == sorted([[rank ^ 1, N], [rank ^ 2, N]]), (
            f"recursive_doubling_all_reduce, rank {rank}: sent {doubling}; on 4 ranks it sends the whole vector "
            f"({N} elements) once to rank {rank ^ 1} and once to rank {rank ^ 2}")
        check_doubling_payloads(rank, sent["recursive_doubling"], doubling_in)
        exchanged = sorted([peer, numel] for peer, numel, _ in sent["all_to_all"])
        want = sorted([d, SPLITS[rank][d]] for d in range(4) if d != rank)
        assert exchanged == want, (
            f"all_to_all, rank {rank}: sent {exchanged}; each other rank gets one message of its rows {want} "
            "(the own block is copied locally)")
        for peer, _, payload in sent["all_to_all"]:
            start = sum(SPLITS[rank][:peer])
            assert torch.equal(payload, a2a_in[rank][start : start + SPLITS[rank][peer]]), (
                f"all_to_all, rank {rank}: the message to rank {peer} is not rank {rank}'s rows for rank {peer} "
                "(its input's block for that rank, as the test drew it)")


def check_ring_payloads(rank: int, sent: list, inputs: list) -> None:
    """A ring message is one block summed over a run of ranks that includes the sender: 1, 2 and 3
    ranks in the reduce-scatter, all 4 in the all-gather."""
    decoded = [sources_of(payload, inputs, RING_BLOCKS) for _, _, payload in sent]
    assert all(d is not None and rank in d[1] for d in decoded), (
        f"ring_all_reduce, rank {rank}: message {[d is not None and rank in d[1] for d in decoded].index(False) + 1} "
        "is not a block of the inputs summed over ranks that include this one: the messages must carry the "
        "partial sums the ring computes, not other data of the right size")
    counts = sorted(len(ranks_in) for _, ranks_in in decoded)
    assert counts == [1, 2, 3, 4, 4, 4], (
        f"ring_all_reduce, rank {rank}: its messages summed {counts} ranks' inputs; a ring on 4 ranks sends "
        "partial sums of 1, 2 and 3 ranks (reduce-scatter), then 3 full sums (all-gather)")


def check_doubling_payloads(rank: int, sent: list, inputs: list) -> None:
    """Recursive doubling sends its own vector to the first partner, then its sum with that
    partner's to the second."""
    decoded = [sources_of(payload, inputs, [N]) for _, _, payload in sent]
    first = sent[0][0] if sent else None
    want = [{rank}, {rank, first}]
    got = [None if d is None else d[1] for d in decoded]
    assert got == want, (
        f"recursive_doubling_all_reduce, rank {rank}: its messages carried the inputs of ranks {got} (None: no "
        f"sum of inputs); expected {want}: its own vector, then its sum with the first partner's")
