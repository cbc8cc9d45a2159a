"""Topology edge cases: a world of one, every kind partitioning the world, large and lopsided
factorisations, bad input, and build_groups on two gloo ranks (same oracles as the public tests)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from conftest import KINDS, oracle_groups, sizes_of
from parallel import ParallelConfig, build_groups, group_ranks, rank_coords, rank_of


@pytest.mark.points(2)
def test_a_world_of_one_has_one_group_of_every_kind():
    cfg = ParallelConfig()
    for kind in KINDS:
        assert group_ranks(cfg, kind) == [[0]], kind
    assert tuple(rank_coords(cfg, 0)) == (0, 0, 0, 0, 0, 0)
    assert rank_of(cfg) == 0


@pytest.mark.points(3)
def test_every_kind_partitions_the_world_for_every_small_factorisation():
    for tp, cp, dp, pp in itertools.product((1, 2, 3), (1, 2), (1, 2, 4), (1, 3)):
        for ep in [e for e in (1, 2, 4, 8) if (dp * cp) % e == 0]:
            sizes = dict(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep)
            cfg, full = ParallelConfig(**sizes), sizes_of(**sizes)
            for kind in KINDS:
                assert group_ranks(cfg, kind) == oracle_groups(full, kind), f"{kind}, {sizes}"


@pytest.mark.points(2)
def test_lopsided_factorisations():
    for sizes in (dict(pp=5), dict(dp=7), dict(tp=16, pp=2), dict(cp=4, dp=3, ep=6), dict(tp=2, cp=2, dp=3, pp=2, ep=3)):
        cfg, full = ParallelConfig(**sizes), sizes_of(**sizes)
        world = full["tp"] * full["cp"] * full["dp"] * full["pp"]
        for kind in KINDS:
            assert group_ranks(cfg, kind) == oracle_groups(full, kind), f"{kind}, {sizes}"
        for rank in range(world):
            c = rank_coords(cfg, rank)
            assert rank_of(cfg, tp=c.tp, cp=c.cp, dp=c.dp, pp=c.pp) == rank
            assert c.ep + full["ep"] * c.edp == c.cp + full["cp"] * c.dp, f"rank {rank}: ep x edp must re-cut dp x cp"


@pytest.mark.points(2)
def test_bad_ranks_coordinates_and_kinds_raise_value_error():
    cfg = ParallelConfig(tp=2, dp=2)
    assert group_ranks(cfg, "tp") == [[0, 1], [2, 3]]  # a working call first
    for bad in (-1, 4, 2.0):
        with pytest.raises(ValueError):
            rank_coords(cfg, bad)
    with pytest.raises(ValueError):
        rank_of(cfg, tp=2)
    with pytest.raises(ValueError):
        rank_of(cfg, pp=1)
    with pytest.raises(ValueError):
        group_ranks(cfg, "dp-tp-xx")
    with pytest.raises(ValueError):
        ParallelConfig(dp=2, cp=1, ep=4)  # ep must divide dp * cp
    with pytest.raises(ValueError):
        ParallelConfig(tp=0)


TWO_RANK_CASES = [dict(tp=2), dict(cp=2), dict(dp=2), dict(pp=2), dict(dp=2, ep=2), dict(cp=2, ep=2), dict()]


def groups_on_two_ranks(cases: list[dict]) -> dict:
    """build_groups for each case (the empty case on a world of 2 must refuse), summed over."""
    import torch.distributed as dist

    out = {"groups": [], "refused": None}
    for sizes in cases:
        if math.prod(sizes_of(**sizes)[k] for k in ("tp", "cp", "dp", "pp")) != dist.get_world_size():
            try:
                build_groups(ParallelConfig(**sizes))
                out["refused"] = False
            except ValueError:
                out["refused"] = True
            continue
        mine = build_groups(ParallelConfig(**sizes))
        got = {}
        for kind, group in mine.items():
            t = torch.tensor([1.0 + dist.get_rank()])
            dist.all_reduce(t, group=group)
            got[kind] = (dist.get_process_group_ranks(group), t.item())
        for group in {id(g): g for g in mine.values()}.values():
            if group is not dist.group.WORLD:
                dist.destroy_process_group(group)
        out["groups"].append(got)
    return out


@pytest.mark.points(3)
@pytest.mark.world_size(2)
def test_build_groups_on_two_ranks_and_refuses_a_config_of_another_world(ranks):
    results = ranks.run(groups_on_two_ranks, TWO_RANK_CASES)
    for rank, out in enumerate(results):
        assert out["refused"] is True, f"rank {rank}: build_groups accepted a world-1 config on 2 ranks"
        for sizes, got in zip(TWO_RANK_CASES[:-1], out["groups"]):
            assert sorted(got) == sorted(KINDS), f"rank {rank}, {sizes}"
            for kind in KINDS:
                want = next(g for g in oracle_groups(sizes_of(**sizes), kind) if rank in g)
                assert got[kind] == (want, float(sum(r + 1 for r in want))), f"rank {rank}, {sizes}, {kind}"
