"""What the ring-attention tests run on every rank (shared by tests/ and hidden/). Each rank is
handed only its own shards of q, k and v (drawn in the judge from a seed no rank knows: checks.py),
so the other ranks' keys and values can reach it only through the package's messages. What a rank
returns is its word: the judge checks it against SDPA over the whole sequence."""

from __future__ import annotations

import torch

from longmoe import ring_attention


def ring_on_rank(shards: list[dict], cases: list[tuple]) -> list[torch.Tensor]:
    """This rank's ring_attention output for each case (layout, causal, window, magnitude)."""
    return [ring_attention(s["q"], s["k"], s["v"], causal=causal, window=window, layout=layout)
            for s, (layout, causal, window, _) in zip(shards, cases)]
