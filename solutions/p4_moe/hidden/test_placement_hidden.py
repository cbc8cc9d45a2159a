"""More placement cases: the whole EPLB placement against the handout's rule written again here, on
a second trace; a trace whose hottest expert would take more replicas than there are ranks; uniform
load; too few slots; replicas assigned on a larger random routing; loads with an expert held twice
by one rank."""

from __future__ import annotations

import pytest
import torch
from conftest import eplb_oracle, loads_oracle, skewed_load
from epmoe import ExpertPlacement, assign_replicas, eplb_placement, rank_loads

pytestmark = pytest.mark.kernels()  # plain torch and Python, no Triton kernel


def as_tuples(p) -> tuple:
    return tuple(tuple(int(e) for e in row) for row in p.slots)


@pytest.mark.points(3)
@pytest.mark.parametrize("world, per_rank, experts, zipf, seed", [(16, 5, 64, 1.1, 4), (6, 5, 24, 1.0, 5)])
def test_eplb_placement_follows_the_handout(world, per_rank, experts, zipf, seed):
    load = skewed_load(experts, 4096, 6, zipf, seed)
    got = as_tuples(eplb_placement(torch.tensor(load), world, per_rank))
    want = eplb_oracle(load, world, per_rank)
    assert got == want, f"{world} ranks x {per_rank} slots, {experts} experts: placement {got}, the handout's rule gives {want}"
    base = loads_oracle(tuple(tuple(range(r * experts // world, (r + 1) * experts // world)) for r in range(world)), load)
    after = loads_oracle(got, load)
    ratio = lambda v: max(v) / (sum(v) / len(v))
    assert ratio(after) <= 0.8 * ratio(base), f"max/mean {ratio(after):.3f} against {ratio(base):.3f} without replicas"


@pytest.mark.points(2)
def test_replicas_never_exceed_the_ranks():
    load = [1000.0] + [1.0] * 7  # expert 0 alone would take every spare slot
    got = as_tuples(eplb_placement(torch.tensor(load), 3, 4))
    counts = [sum(row.count(e) for row in got) for e in range(8)]
    assert counts[0] == 3, f"expert 0 has {counts[0]} replicas over 3 ranks: at most one a rank (world) replicas"
    assert got == eplb_oracle(load, 3, 4), f"placement {got}, the handout's rule gives {eplb_oracle(load, 3, 4)}"


def test_uniform_load_stays_balanced():
    got = eplb_placement(torch.full((12,), 50.0), 4, 3)
    assert sorted(e for row in got.slots for e in row) == list(range(12))
    assert rank_loads(got, torch.full((12,), 50.0)) == pytest.approx([150.0] * 4)


def test_too_few_slots_is_a_value_error():
    assert len(eplb_placement(torch.ones(8), 2, 4).slots) == 2  # the valid case
    with pytest.raises(ValueError):
        eplb_placement(torch.ones(9), 2, 4)


@pytest.mark.points(2)
def test_assign_replicas_on_a_random_routing():
    slots = ((0, 1, 2, 5), (3, 5, 0, 4), (5, 6, 7, 0))
    placement = ExpertPlacement(8, slots)
    experts = torch.stack([torch.randperm(8, generator=torch.Generator().manual_seed(t))[:3] for t in range(40)])
    replicas = {e: [r * 4 + j for r, row in enumerate(slots) for j, x in enumerate(row) if x == e] for e in range(8)}
    want = [[replicas[int(e)][t % len(replicas[int(e)])] for e in row] for t, row in enumerate(experts)]
    got = assign_replicas(experts, placement).tolist()
    wrong = [t for t in range(40) if got[t] != want[t]]
    assert not wrong, f"token {wrong[0]} (experts {experts[wrong[0]].tolist()}): slots {got[wrong[0]]}, want {want[wrong[0]]}"


def test_rank_loads_with_an_expert_twice_on_one_rank():
    placement = ExpertPlacement(3, ((0, 0), (1, 2)))
    assert rank_loads(placement, torch.tensor([10.0, 4.0, 6.0])) == pytest.approx([10.0, 10.0])
