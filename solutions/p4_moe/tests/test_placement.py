"""Expert placement: contiguous shards, replicas assigned by token, rank loads, and redundant experts
placed by load (EPLB) on a skewed routing trace drawn here. Loads are recomputed in the judge from
the placement the package returns (an expert's tokens split evenly over its replicas)."""

from __future__ import annotations

import pytest
import torch
from conftest import eplb_oracle, loads_oracle, skewed_load
from epmoe import ExpertPlacement, assign_replicas, contiguous_placement, eplb_placement, rank_loads

pytestmark = pytest.mark.kernels()  # plain torch and Python, no Triton kernel


def test_contiguous_placement_gives_each_rank_a_block():
    got = contiguous_placement(12, 3)
    assert [list(s) for s in got.slots] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    slots = assign_replicas(torch.tensor([[5, 11], [0, 7]]), got).tolist()
    assert slots == [[5, 11], [0, 7]], f"slots {slots}: without replicas an expert's slot is its own id"
    with pytest.raises(ValueError, match="evenly"):
        contiguous_placement(10, 3)


@pytest.mark.points(2)
def test_assign_replicas_spreads_an_expert_over_its_replicas():
    placement = ExpertPlacement(4, ((0, 1, 3), (2, 3, 0)))  # expert 0 in slots 0 and 5, expert 3 in 2 and 4
    experts = torch.tensor([[0, 3], [0, 1], [3, 0], [2, 0], [0, 3]])
    want = [[0, 2], [5, 1], [2, 0], [3, 5], [0, 2]]  # token t takes replica t mod n_e
    got = assign_replicas(experts, placement)
    assert got.tolist() == want, f"slots {got.tolist()}, want {want} (token t takes replica t mod n_e, in slot order)"


def test_rank_loads_split_an_expert_evenly():
    placement = ExpertPlacement(4, ((0, 1, 3), (2, 3, 0)))
    load = torch.tensor([40.0, 10.0, 20.0, 30.0])
    assert rank_loads(placement, load) == pytest.approx([20 + 10 + 15, 20 + 15 + 20])


@pytest.mark.points(4)
def test_eplb_cuts_the_imbalance_on_a_skewed_trace():
    world, per_rank, experts = 8, 5, 32
    load = skewed_load(experts, 2048, 4, zipf=0.8, seed=3)
    got = eplb_placement(torch.tensor(load), world, per_rank)
    slots = tuple(tuple(int(e) for e in row) for row in got.slots)
    assert len(slots) == world and all(len(row) == per_rank for row in slots), f"slots per rank: {[len(r) for r in slots]}"
    assert {e for row in slots for e in row} == set(range(experts)), "every expert needs a slot"
    before = loads_oracle(tuple(tuple(range(r * 4, r * 4 + 4)) for r in range(world)), load)
    after = loads_oracle(slots, load)
    ratio = lambda v: max(v) / (sum(v) / len(v))
    assert ratio(after) <= 0.8 * ratio(before), (
        f"max/mean rank load {ratio(after):.3f} with redundant experts, {ratio(before):.3f} without: want a cut of 20% or more")
    want = eplb_oracle(load, world, per_rank)
    count = lambda s: [sum(r.count(e) for r in s) for e in range(experts)]
    assert count(slots) == count(want), (
        f"replicas per expert {count(slots)}, the handout's step 1 gives {count(want)}")
