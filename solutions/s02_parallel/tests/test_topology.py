"""Rank topology in Megatron-Core's order (tp-cp-ep-dp-pp): coordinates and the groups of every kind.

Oracles: a permutation of arange(world) reshaped to the grid (pp, dp, cp, tp), slowest axis
first, so tp varies fastest (the expert grid is (pp, edp, ep, tp)); Megatron-Core's own docstring
example; and, on four gloo ranks, torch's DeviceMesh over the same grid.
"""

from __future__ import annotations

import pytest
import torch
from conftest import DECODER_AXES, EXPERT_AXES, KINDS, oracle_groups, sizes_of
from parallel import ParallelConfig, build_groups, group_ranks, rank_coords, rank_of


def oracle_coords(sizes: dict[str, int], rank: int) -> tuple[int, ...]:
    """(tp, cp, dp, pp, ep, edp) of `rank`: its index in each grid."""
    dec = (torch.arange(sizes["tp"] * sizes["cp"] * sizes["dp"] * sizes["pp"])
           .reshape([sizes[a] for a in DECODER_AXES]) == rank).nonzero()[0].tolist()
    exp = (torch.arange(sizes["tp"] * sizes["cp"] * sizes["dp"] * sizes["pp"])
           .reshape([sizes[a] for a in EXPERT_AXES]) == rank).nonzero()[0].tolist()
    pp, dp, cp, tp = dec
    _, edp, ep, _ = exp
    return (tp, cp, dp, pp, ep, edp)


FACTORISATIONS = [
    dict(tp=2, dp=2),
    dict(tp=2, cp=2, dp=2, pp=2, ep=2),
    dict(tp=4, dp=2, pp=3),
    dict(tp=2, cp=3, dp=2, pp=2, ep=3),
    dict(tp=1, cp=2, dp=4, pp=2, ep=8),
    dict(tp=8, cp=1, dp=1, pp=1),
]


@pytest.mark.points(2)
@pytest.mark.parametrize("sizes", FACTORISATIONS, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
def test_every_group_kind_matches_a_permutation_of_arange(sizes):
    cfg = ParallelConfig(**sizes)
    full = sizes_of(**sizes)
    for kind in KINDS:
        assert group_ranks(cfg, kind) == oracle_groups(full, kind), f"groups of kind {kind!r} for {sizes}"


@pytest.mark.points(2)
@pytest.mark.parametrize("sizes", FACTORISATIONS[:4], ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
def test_rank_coords_and_rank_of_are_inverse_in_megatron_order(sizes):
    cfg = ParallelConfig(**sizes)
    full = sizes_of(**sizes)
    world = full["tp"] * full["cp"] * full["dp"] * full["pp"]
    for rank in range(world):
        coords = rank_coords(cfg, rank)
        assert tuple(coords) == oracle_coords(full, rank), f"rank {rank} of {sizes}"
        assert rank_of(cfg, tp=coords.tp, cp=coords.cp, dp=coords.dp, pp=coords.pp) == rank


@pytest.mark.points(1)
def test_megatron_docstring_example_tp2_dp3_pp4():
    # megatron/core/parallel_state.py, generate_masked_orthogonal_rank_groups: "parallel_size =
    # [tp_size, dp_size, pp_size] = [2, 3, 4] ... dp_group[0] = [0, 2, 4], dp_group[1] = [1, 3, 5],
    # ..., dp_group[7] = [19, 21, 23]"
    dp = group_ranks(ParallelConfig(tp=2, dp=3, pp=4), "dp")
    assert len(dp) == 8
    assert dp[0] == [0, 2, 4] and dp[1] == [1, 3, 5] and dp[7] == [19, 21, 23]
    assert group_ranks(ParallelConfig(tp=2, dp=3, pp=4), "pp")[0] == [0, 6, 12, 18]


@pytest.mark.points(1)
def test_tensor_parallel_peers_are_neighbours_and_pipeline_stages_far_apart():
    cfg = ParallelConfig(tp=8, dp=2, pp=4)  # 64 GPUs: 8 nodes of 8
    assert group_ranks(cfg, "tp")[:2] == [list(range(8)), list(range(8, 16))]
    assert group_ranks(cfg, "pp")[0] == [0, 16, 32, 48]
    assert group_ranks(cfg, "dp")[0] == [0, 8]
    assert tuple(rank_coords(cfg, 43)) == (3, 0, 1, 2, 0, 1)  # 43 = 3 + 8 * (0 + 1 * (1 + 2 * 2)); edp = dp here


@pytest.mark.points(1)
def test_expert_groups_are_carved_out_of_dp_times_cp():
    cfg = ParallelConfig(tp=2, cp=2, dp=2, ep=4)  # dp x cp = 4 ranks per tp slice become 4 experts
    assert group_ranks(cfg, "ep") == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert group_ranks(cfg, "ep") == group_ranks(cfg, "dp-cp")
    assert group_ranks(cfg, "edp") == [[r] for r in range(8)]
    assert group_ranks(cfg, "tp-ep") == [list(range(8))]
    cfg = ParallelConfig(tp=2, cp=2, dp=2, ep=2)
    assert group_ranks(cfg, "ep") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert group_ranks(cfg, "edp") == [[0, 4], [1, 5], [2, 6], [3, 7]]


# ---- on four gloo ranks: build_groups against torch's DeviceMesh over the same grid ---------------
MESH_CASES = [dict(tp=2, dp=2), dict(tp=2, pp=2), dict(cp=2, dp=2, ep=2), dict(dp=2, pp=2, ep=2), dict(tp=4)]
MESH_KINDS = ("tp", "cp", "dp", "pp", "ep", "edp", "dp-cp")  # one mesh dimension each, and one flattened


def mesh_groups(full: dict[str, int]) -> dict[str, list[int]]:
    """This rank's groups of MESH_KINDS from init_device_mesh over the decoder and expert grids
    (run inside oracle(); the groups are destroyed again: each gloo group holds three threads)."""
    import torch.distributed as dist
    from torch.distributed import device_mesh  # its init_device_mesh is looked up inside oracle(): forbidden outside

    meshes = {axes: device_mesh.init_device_mesh("cpu", tuple(full[a] for a in axes), mesh_dim_names=axes)
              for axes in (DECODER_AXES, EXPERT_AXES)}
    groups = {kind: meshes[EXPERT_AXES if kind in ("ep", "edp") else DECODER_AXES].get_group(kind)
              for kind in MESH_KINDS if kind != "dp-cp"}
    groups["dp-cp"] = meshes[DECODER_AXES]["dp", "cp"]._flatten("dp_cp").get_group()
    ranks = {kind: dist.get_process_group_ranks(g) for kind, g in groups.items()}
    world = dist.group.WORLD  # a mesh dimension spanning the world may reuse the default group: keep it
    for g in [*groups.values(), *(m.get_group(d) for m in meshes.values() for d in m.mesh_dim_names)]:
        if g is world:
            continue
        try:
            dist.destroy_process_group(g)
        except ValueError:  # already destroyed: the two meshes share their tp and pp groups
            pass
    return ranks


def groups_on_rank(cases: list[dict]) -> list[dict]:
    """For each case: this rank's group of every kind from build_groups, the sum of the ranks over
    each (an all-reduce on the student's group), and DeviceMesh's groups of MESH_KINDS."""
    import torch.distributed as dist

    from autograder.testing import oracle

    out = []
    for sizes in cases:
        full = sizes_of(**sizes)
        mine = build_groups(ParallelConfig(**sizes))
        student, sums = {}, {}
        for kind, group in mine.items():
            student[kind] = dist.get_process_group_ranks(group)
            t = torch.tensor([float(dist.get_rank())])
            dist.all_reduce(t, group=group)
            sums[kind] = t.item()
        for group in {id(g): g for g in mine.values()}.values():
            dist.destroy_process_group(group)
        del mine, group
        with oracle():
            mesh = mesh_groups(full)
        out.append({"student": student, "sums": sums, "mesh": mesh})
    return out


@pytest.mark.points(4)
@pytest.mark.world_size(4)
def test_build_groups_equal_device_mesh_groups_on_four_ranks(ranks):
    results = ranks.run(groups_on_rank, MESH_CASES)
    for rank, per_case in enumerate(results):
        for sizes, got in zip(MESH_CASES, per_case):
            full = sizes_of(**sizes)
            assert sorted(got["student"]) == sorted(KINDS), f"rank {rank}, {sizes}: kinds {sorted(got['student'])}"
            for kind in KINDS:
                expected = next(g for g in oracle_groups(full, kind) if rank in g)
                if kind in MESH_KINDS:
                    assert got["mesh"][kind] == expected, f"the two oracles disagree: {kind}, {sizes}"
                    assert got["student"][kind] == got["mesh"][kind], f"rank {rank}, {sizes}: group {kind} vs DeviceMesh"
                assert got["student"][kind] == expected, f"rank {rank}, {sizes}: group {kind}"
                assert got["sums"][kind] == float(sum(expected)), \
                    f"rank {rank}, {sizes}: an all-reduce over your {kind} group summed {got['sums'][kind]}"
