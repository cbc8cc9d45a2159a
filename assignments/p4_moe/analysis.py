"""The analysis run (README, section "Analysis"): DeepSeek-V3's prefill layout (256 routed experts,
8 a token, hidden 7168 in bf16, EP over 32 ranks with 9 slots a rank: 32 redundant experts) on a
skewed routing trace, through YOUR package: the traffic of one dispatch against an all-gather of
every token, and the ranks' load without and with redundant experts placed by load.

    python analysis.py          # prints every number of answers/ep_numbers.toml, writes answers/ep_traffic.png

The grader imports these functions from its own copy of this file and runs them on your package.

The trace: every one of the 32 ranks holds 4096 tokens; expert e's popularity is
(1 + rank_of_e) ** -ZIPF for a fixed random ranking of the experts (a layer's seed), and each token
draws 8 distinct experts in proportion to popularity (Gumbel top-k on torch.rand: reproducible
across machines and torch versions).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

V3 = {"num_experts": 256, "top_k": 8, "hidden": 7168, "dtype_bytes": 2}
EP = {"world": 32, "slots_per_rank": 9, "tokens_per_rank": 4096}
ZIPF = 0.5
LAYERS = {"layer 0": 0, "layer 1": 1}  # name -> the trace's seed


@functools.cache
def trace(seed: int) -> torch.Tensor:
    """(world, tokens_per_rank, top_k) logical experts of every token of every rank."""
    g = torch.Generator().manual_seed(seed)
    e = V3["num_experts"]
    ranking = torch.randperm(e, generator=g)  # expert ranking[i] is the i-th most popular
    popularity = torch.empty(e)
    popularity[ranking] = (1.0 + torch.arange(e, dtype=torch.float32)) ** -ZIPF
    u = torch.rand(EP["world"], EP["tokens_per_rank"], e, generator=g).clamp_(1e-12, 1 - 1e-7)
    gumbel = popularity.log() - torch.log(-torch.log(u))
    return gumbel.topk(V3["top_k"], dim=-1).indices


def expert_load(seed: int) -> torch.Tensor:
    """(E,) (token, choice) pairs routed to each expert over all ranks."""
    return torch.bincount(trace(seed).reshape(-1), minlength=V3["num_experts"]).float()


def row_bytes() -> int:
    return V3["hidden"] * V3["dtype_bytes"]


def placement_of(kind: str, seed: int):
    """"contiguous" (no redundancy) or "eplb" (9 slots a rank, placed by the layer's own load)."""
    from epmoe import contiguous_placement, eplb_placement

    if kind == "contiguous":
        return contiguous_placement(V3["num_experts"], EP["world"])
    return eplb_placement(expert_load(seed), EP["world"], EP["slots_per_rank"])


def layer_matrix(seed: int, kind: str = "contiguous") -> list[list[int]]:
    """Bytes rank s sends rank d in one dispatch of the layer, under placement `kind`."""
    from epmoe import assign_replicas, traffic_matrix

    placement = placement_of(kind, seed)
    slots = [assign_replicas(t, placement) for t in trace(seed)]
    return traffic_matrix(slots, placement, row_bytes())


def traffic_numbers() -> dict:
    from epmoe import allgather_bytes, remote_bytes

    moved = remote_bytes(layer_matrix(LAYERS["layer 0"]))
    gathered = allgather_bytes([EP["tokens_per_rank"]] * EP["world"], row_bytes())
    return {"dispatch_gib": moved / 2**30, "allgather_gib": gathered / 2**30, "moved_fraction": moved / gathered,
            "max_recv_gib_contiguous": max_received(layer_matrix(LAYERS["layer 0"])) / 2**30,
            "max_recv_gib_eplb": max_received(layer_matrix(LAYERS["layer 0"], "eplb")) / 2**30}


def max_received(matrix: list[list[int]]) -> int:
    """The most bytes any rank receives from the others in one dispatch (its inbound link's load)."""
    return max(sum(row[d] for s, row in enumerate(matrix) if s != d) for d in range(len(matrix)))


def balance_numbers() -> dict:
    from epmoe import imbalance, rank_loads

    seed = LAYERS["layer 0"]
    load = expert_load(seed)
    before = imbalance(rank_loads(placement_of("contiguous", seed), load))
    after = imbalance(rank_loads(placement_of("eplb", seed), load))
    return {"hottest_expert_share": float(load.max() / load.mean()), "imbalance_contiguous": before,
            "imbalance_eplb": after, "eplb_cut": 1 - after / before}


def numbers() -> dict:
    return {**traffic_numbers(), **balance_numbers()}


def write_diagram(path: str | Path = Path(__file__).parent / "answers" / "ep_traffic.png") -> Path:
    from epmoe import plot_traffic

    matrices = {f"{name}, {kind}": layer_matrix(seed, kind) for name, seed in LAYERS.items()
                for kind in ("contiguous", "eplb")}
    return plot_traffic(matrices, path)


if __name__ == "__main__":
    for key, value in numbers().items():
        print(f"{key} = {value:.6g}")
    print(f"wrote {write_diagram()}")
