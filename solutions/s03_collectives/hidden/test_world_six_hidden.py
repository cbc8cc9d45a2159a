"""Six ranks: recursive doubling folds two pairs (p = 4, e = 2: ranks 0 -> 1 and 2 -> 3 hand over),
so the doubling phase numbers the odd ranks below 2e as r // 2 and the rest as r - e. With one pair
(3 and 5 ranks) a plain shift r - e happens to number them the same way; from two pairs on it does
not. Ring blocks are uneven too. One world size only: every rank is a process that starts torch.

Inputs are powers of two per rank: rank r holds i * 2**6 + 2**r at flat index i, so the low 6 bits
of a wrong sum name the ranks it added (exact in int64 and float32: values stay below 2**24)."""

from __future__ import annotations

import pytest
import torch

from autograder.testing import oracle

WORLD = 6
SHAPES = [(1,), (3,), (7, 2)]
DTYPES = ["int64", "float32"]
# the doubling first: its fold is what only this world size reaches
FUNCTIONS = {"recursive_doubling_all_reduce": " (p = 4: ranks 0 -> 1 and 2 -> 3 fold)", "ring_all_reduce": ""}


def power_input(rank: int, world: int, shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    numel = 1
    for d in shape:
        numel *= d
    x = torch.arange(numel, dtype=torch.int64) * 2**world + 2**rank
    return x.reshape(shape).to(getattr(torch, dtype))


def all_reduce_powers_on_rank(function: str, shapes: list, dtypes: list[str]) -> list[list]:
    """For each (shape, dtype): [x after the package's in-place all-reduce, the library's all_reduce
    of a copy (the oracle), whether the package returned x itself]."""
    import collectives
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    out = []
    for shape in shapes:
        for dtype in dtypes:
            x = power_input(rank, world, tuple(shape), dtype)
            theirs = x.clone()
            with oracle():
                dist.all_reduce(theirs)
            returned = getattr(collectives, function)(x)
            out.append([x, theirs, returned is x])
    return out


def ranks_summed(value: int, world: int) -> str:
    """What the low `world` bits of an int sum say: the ranks added once each (if no carry)."""
    low = value % 2**world
    return f"low bits {low:0{world}b}: ranks {[r for r in range(world) if low >> r & 1]}"


@pytest.mark.points(4)
@pytest.mark.world_size(WORLD)
def test_all_reduce_on_six_ranks_with_two_folded_pairs(ranks):
    cases = [(shape, dtype) for shape in SHAPES for dtype in DTYPES]
    for function, fold in FUNCTIONS.items():
        where = f"{function} on {WORLD} ranks"
        try:
            outs = ranks.run(all_reduce_powers_on_rank, function, SHAPES, DTYPES)
        except AssertionError as failure:  # a rank raised or hung: name the world it happened in
            raise AssertionError(f"{where}{fold}: {failure}") from None
        for rank, results in enumerate(outs):
            for (shape, dtype), (got, theirs, returned_input) in zip(cases, results):
                want = sum(power_input(r, WORLD, shape, dtype) for r in range(WORLD))
                label = f"{where}, rank {rank}, {dtype} {shape}"
                assert torch.equal(theirs, want), f"{label}: torch.distributed.all_reduce (the oracle) disagrees"
                assert returned_input, f"{label}: returned another tensor; sum into the input tensor and return it"
                assert got.shape == want.shape and got.dtype == want.dtype, (
                    f"{label}: got {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}")
                if not torch.equal(got, want):
                    first = int(got.reshape(-1)[0])
                    raise AssertionError(
                        f"{label}: got {got.reshape(-1).tolist()}, expected {want.reshape(-1).tolist()} (rank r holds "
                        f"i * 64 + 2**r at index i; element 0 is {first}, {ranks_summed(first, WORLD)}; expected all "
                        f"{WORLD} once)")
