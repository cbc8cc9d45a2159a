"""What the ring-attention tests run on every rank (shared by tests/ and hidden/). Each rank is
handed only its own shards of q, k and v (drawn in the judge from a seed no rank knows: checks.py),
so the other ranks' keys and values can reach it only through the package's messages. What a rank
returns is its word: the judge checks its rows against SDPA over the whole sequence, and what the
collective spy copied of its sends (a diagnosis: the spy runs in the rank) against the ring."""

from __future__ import annotations

import torch

from autograder.collective_spy import counting_collectives
from longmoe import ring_attention


def ring_on_rank(shards: list[dict], cases: list[tuple]) -> dict:
    """This rank's ring_attention output for each case (layout, causal, window, magnitude), and per
    case the (peer, tensor) of every send it made (point-to-point and batched)."""
    outputs, sent = [], []
    for s, (layout, causal, window, _) in zip(shards, cases):
        messages: list = []
        with counting_collectives("longmoe", messages):
            outputs.append(ring_attention(s["q"], s["k"], s["v"], causal=causal, window=window, layout=layout))
        sent.append([(m["peer"], m["data"]) for m in messages if m["kind"] == "send"])
    return {"outputs": outputs, "sent": sent}
