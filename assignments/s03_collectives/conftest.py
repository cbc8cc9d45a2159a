"""Shared by tests/ and hidden/: rank-tagged inputs whose values name their source, the rank
functions that run the package on every rank beside torch.distributed's own collectives (the
oracle, inside oracle()), and the judge-side checks that decode a wrong value into where it came
from.

Tags (integers, exact on any backend):
- sums: rank r holds x[i] = i * TAG + 10**r, so a correct sum over n ranks is n * i * TAG + 11..1;
  the low digits count how often each rank's element was added, the high part whose index it was;
- gathers: rank r's row j is r * TAG + j ("rank r, row j");
- all-to-all: the k-th row rank s sends to rank d is s * 10**8 + d * TAG + k.
A 2-d tensor repeats a row's tag in every column c as tag * 10 + c.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from autograder.testing import oracle, tolerances

TAG = 100_000  # index and source digits apart; worlds of at most 4 ranks (10**r < TAG)
FLOAT_SEED = 1000  # rank r's float input comes from torch.Generator().manual_seed(FLOAT_SEED + r)
ALL_REDUCES = {"ring": "ring_all_reduce", "recursive_doubling": "recursive_doubling_all_reduce"}


# ---- inputs: the same functions build them on the ranks and recompute them in the judge --------------
def sum_input(kind: str, rank: int, shape: tuple[int, ...]) -> torch.Tensor:
    """Rank `rank`'s input to a sum: "int" (int64 tags, by flat index) or "float" (float32 N(0, 1))."""
    numel = 1
    for d in shape:
        numel *= d
    if kind == "int":
        return (torch.arange(numel, dtype=torch.int64) * TAG + 10**rank).reshape(shape)
    return torch.randn(shape, generator=torch.Generator().manual_seed(FLOAT_SEED + rank))


def row_tags(tags: torch.Tensor, width: int) -> torch.Tensor:
    """(rows,) tags -> (rows,) when width is 0, else (rows, width) with tag * 10 + column."""
    return tags if width == 0 else tags[:, None] * 10 + torch.arange(width)


def gather_input(rank: int, rows: int, width: int = 0) -> torch.Tensor:
    return row_tags(rank * TAG + torch.arange(rows, dtype=torch.int64), width)


def a2a_input(rank: int, send_splits: list[int], width: int = 0) -> torch.Tensor:
    parts = [rank * 10**8 + dst * TAG + torch.arange(k, dtype=torch.int64) for dst, k in enumerate(send_splits)]
    return row_tags(torch.cat(parts), width)


def offset(sizes: list[int], rank: int) -> int:
    return sum(sizes[:rank])


# ---- on the ranks: the package and the oracle, side by side ------------------------------------------
def all_reduce_on_rank(algorithm: str, kind: str, shapes: list[tuple[int, ...]]) -> list[list]:
    """For each shape: [the input tensor after the package's in-place all-reduce, the library's
    all_reduce of a copy of the input (the oracle), whether the package returned the input itself]."""
    import collectives
    import torch.distributed as dist

    fn = getattr(collectives, ALL_REDUCES[algorithm])
    out = []
    for shape in shapes:
        x = sum_input(kind, dist.get_rank(), tuple(shape))
        theirs = x.clone()
        with oracle():
            dist.all_reduce(theirs)
        returned = fn(x)
        out.append([x, theirs, returned is x])
    return out


def gather_scatter_on_rank(cases: list[list]) -> list[list]:
    """cases: [rows per rank (sizes), width]. For each: [ring_all_gather(own shard, sizes), the
    library's all_gather of shards padded to the longest, ring_reduce_scatter(x, sizes) of a tagged
    x, the library's reduce_scatter of the same blocks]."""
    import torch.distributed as dist
    from collectives import ring_all_gather, ring_reduce_scatter

    rank, world = dist.get_rank(), dist.get_world_size()
    out = []
    for sizes, width in cases:
        shard = gather_input(rank, sizes[rank], width)
        x = sum_input("int", rank, (sum(sizes),))
        x = row_tags(x, width)
        with oracle():
            longest = max(sizes)
            padded = torch.zeros((longest, *shard.shape[1:]), dtype=shard.dtype)
            padded[: sizes[rank]] = shard
            slots = [torch.empty_like(padded) for _ in range(world)]
            dist.all_gather(slots, padded)
            gathered = torch.cat([s[:k] for s, k in zip(slots, sizes)])
            blocks = [b.contiguous() for b in torch.split(x, sizes)]
            reduced = torch.empty_like(blocks[rank])
            dist.reduce_scatter(reduced, blocks)
        out.append([ring_all_gather(shard, sizes), gathered, ring_reduce_scatter(x, sizes), reduced])
    return out


def all_to_all_on_rank(cases: list[list]) -> list[list]:
    """cases: [splits, width] with splits[s][d] the rows rank s sends rank d. For each: [the
    package's all_to_all, the library's all_to_all_single on the same rows]."""
    import torch.distributed as dist
    from collectives import all_to_all

    rank, world = dist.get_rank(), dist.get_world_size()
    out = []
    for splits, width in cases:
        send = list(splits[rank])
        recv = [splits[src][rank] for src in range(world)]
        x = a2a_input(rank, send, width)
        with oracle():
            theirs = torch.empty((sum(recv), *x.shape[1:]), dtype=x.dtype)
            dist.all_to_all_single(theirs, x, output_split_sizes=recv, input_split_sizes=send)
        out.append([all_to_all(x, send, recv), theirs])
    return out


# ---- in the judge: expected values, and what a wrong one says --------------------------------------
def secret_inputs(world: int, numels: list[int]) -> list[torch.Tensor]:
    """One int64 input per rank, drawn here in the judge from a seed no rank sees (not the test's
    seed): sent to its own rank only (ranks.run_each), so the others can learn it only from the
    messages. Values below 2**40: sums over 4 ranks stay exact."""
    import secrets

    g = torch.Generator().manual_seed(secrets.randbits(62))
    return [torch.randint(0, 2**40, (numels[r],), generator=g, dtype=torch.int64) for r in range(world)]


def sources_of(payload: torch.Tensor, inputs: list[torch.Tensor], sizes: list[int]) -> tuple[int, set[int]] | None:
    """(block, ranks) such that payload == the sum of block `block` (of chunk sizes `sizes`) of the
    inputs of exactly those ranks, or None: what a message carried, decoded from the judge's own
    draws (random 40-bit values: two subsets give the same sum with negligible chance)."""
    from itertools import combinations

    payload = payload.reshape(-1).to(torch.int64)
    for block, size in enumerate(sizes):
        if size != payload.numel():
            continue
        start = offset(sizes, block)
        for k in range(1, len(inputs) + 1):
            for subset in combinations(range(len(inputs)), k):
                if torch.equal(sum(inputs[s][start : start + size] for s in subset), payload):
                    return block, set(subset)
    return None


def expected_sum(world: int, shape: tuple[int, ...]) -> torch.Tensor:
    return sum(sum_input("int", r, tuple(shape)) for r in range(world))


def describe_sum(value: int, world: int, index: int) -> str:
    counts = [(value % TAG) // 10**r % 10 for r in range(world)]
    return (f"{value} = index part {value // TAG} (expected {world} x {index} = {world * index}) with rank "
            f"contributions {counts} (expected {[1] * world}: each rank's element once)")


def check_sum(got: torch.Tensor, want: torch.Tensor, world: int, where: str, *, rows: bool = False,
              base: int = 0) -> None:
    """An exact integer sum of tagged inputs; the first wrong element (rows=False: by flat index) or
    row (rows=True: row-tagged, decoded from column 0) is decoded into what went into it. base: the
    tag index of got's first element or row (a block's offset)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (
        f"{where}: got {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}")
    if torch.equal(got, want):
        return
    if rows and got.dim() == 2:
        g, w = got[:, 0] // 10, want[:, 0] // 10  # column 0 holds 10 x the summed tag
        what = "rows"
    else:
        g, w = got.reshape(-1), want.reshape(-1)
        what = "elements"
    bad = (g != w).nonzero().flatten()
    if len(bad) == 0:
        raise AssertionError(f"{where}: the rows' tags are right but other columns are wrong")
    i = int(bad[0])
    raise AssertionError(f"{where}: {len(bad)} of {len(w)} {what} wrong; the first, {what[:-1]} {i}, is "
                         f"{describe_sum(int(g[i]), world, base + i)}")


def describe_row(value: int, kind: str) -> str:
    if kind == "gather":
        return f"rank {value // TAG}'s row {value % TAG}"
    return f"row {value % TAG} that rank {value // 10**8} sent to rank {value // TAG % 1000}"


def check_rows(got: torch.Tensor, want: torch.Tensor, kind: str, where: str) -> None:
    """Exact rows; a wrong one is named by the tag it carries."""
    assert got.shape == want.shape and got.dtype == want.dtype, (
        f"{where}: got {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}")
    if torch.equal(got, want):
        return
    flat_got = got if got.dim() == 1 else got[:, 0] // 10
    flat_want = want if want.dim() == 1 else want[:, 0] // 10
    rows = (flat_got != flat_want).nonzero().flatten()
    if len(rows) == 0:
        raise AssertionError(f"{where}: the rows are in place but some columns are wrong")
    j = int(rows[0])
    raise AssertionError(f"{where}: {len(rows)} of {len(want)} rows wrong; row {j} holds "
                         f"{describe_row(int(flat_got[j]), kind)}, expected {describe_row(int(flat_want[j]), kind)}")


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES


def check_all_reduce(outs: list, kind: str, shapes: list[tuple[int, ...]], tol, where: str) -> None:
    """outs: each rank's all_reduce_on_rank result. In place, exact (int) or within "float32 sum" of
    the fp64 sum and of the library's result (float), and the same bits on every rank."""
    world = len(outs)
    for rank, results in enumerate(outs):
        for shape, (x, theirs, returned_input) in zip(shapes, results):
            label = f"{where}, rank {rank}, shape {tuple(shape)}"
            assert returned_input, f"{label}: returned another tensor; sum into the input tensor and return it"
            if kind == "int":
                want = expected_sum(world, tuple(shape))
                check_sum(theirs, want, world, f"{label}: torch.distributed.all_reduce (the oracle)")
                check_sum(x, want, world, label)
            else:
                want = sum(sum_input("float", r, tuple(shape)).double() for r in range(world)).float()
                torch.testing.assert_close(x, want, **tol("float32 sum"), msg=lambda m: f"{label}, vs fp64: {m}")
                torch.testing.assert_close(x, theirs, **tol("float32 sum"),
                                           msg=lambda m: f"{label}, vs torch.distributed.all_reduce: {m}")
    for i, shape in enumerate(shapes):
        for rank in range(1, world):
            assert torch.equal(outs[rank][i][0], outs[0][i][0]), (
                f"{where}, shape {tuple(shape)}: rank {rank} holds other bits than rank 0; every rank must end "
                "with the same result (sum each block once, then copy it)")


def check_gather_scatter(outs: list, cases: list[list], where: str) -> None:
    """outs: each rank's gather_scatter_on_rank result, checked against tags recomputed here and
    against the library's all_gather / reduce_scatter on the ranks."""
    world = len(outs)
    for rank, results in enumerate(outs):
        for (sizes, width), (gathered, theirs_g, reduced, theirs_r) in zip(cases, results):
            label = f"{where}, rank {rank}, sizes {sizes}, width {width}"
            want = torch.cat([gather_input(r, sizes[r], width) for r in range(world)])
            check_rows(theirs_g, want, "gather", f"{label}: torch.distributed.all_gather (the oracle)")
            check_rows(gathered, want, "gather", f"ring_all_gather, {label}")
            start = offset(sizes, rank)
            total = sum(row_tags(sum_input("int", r, (sum(sizes),)), width) for r in range(world))
            block = total[start : start + sizes[rank]]
            check_sum(theirs_r, block, world, f"{label}: torch.distributed.reduce_scatter (the oracle)",
                      rows=True, base=start)
            check_sum(reduced, block, world, f"ring_reduce_scatter, {label}", rows=True, base=start)


def check_all_to_all(outs: list, cases: list[list], where: str) -> None:
    world = len(outs)
    for rank, results in enumerate(outs):
        for (splits, width), (got, theirs) in zip(cases, results):
            label = f"{where}, rank {rank}, splits {splits}, width {width}"
            parts = [src * 10**8 + rank * TAG + torch.arange(splits[src][rank], dtype=torch.int64)
                     for src in range(world)]
            want = row_tags(torch.cat(parts), width)
            check_rows(theirs, want, "a2a", f"{label}: torch.distributed.all_to_all_single (the oracle)")
            check_rows(got, want, "a2a", f"all_to_all, {label}")


@contextmanager
def sends_recorded(records: list, payloads: bool = False):
    """Record [peer, numel] of each send and isend the package makes while the block runs (also
    through distributed_c10d's names, which dist.P2POp and batch_isend_irecv use); with payloads,
    [peer, numel, a copy of the tensor sent], for the judge to check what crossed (sources_of)."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    patches = []
    depth = [0]  # torch's send calls isend by its module name: a send inside a recorded one is the same message
    for name in ("isend", "send"):
        original = getattr(dist, name)

        def spy(tensor, dst=None, *args, _original=original, **kwargs):
            if depth[0] == 0:
                record = [dst if dst is not None else kwargs.get("group_dst"), tensor.numel()]
                records.append(record + [tensor.detach().clone()] if payloads else record)
            depth[0] += 1
            try:
                return _original(tensor, dst, *args, **kwargs)
            finally:
                depth[0] -= 1

        owners = [dist, c10d] + [m for n, m in list(sys.modules.items())
                           if m is not None and (n == "collectives" or n.startswith("collectives."))]
        for owner in owners:
            for attr, value in list(vars(owner).items()):
                if value is original:
                    setattr(owner, attr, spy)
                    patches.append((owner, attr, original))
    try:
        yield
    finally:
        for owner, attr, original in reversed(patches):
            setattr(owner, attr, original)
