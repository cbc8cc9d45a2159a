"""Two ranks: the API's contract. All-reduce writes into the very tensor it is given (a transposed
view, a slice of a larger tensor: the memory behind it, and nothing else) and returns it; the
other collectives leave their inputs alone; sizes that cannot fit raise ValueError on every rank."""

from __future__ import annotations

import pytest
import torch
from conftest import check_sum, expected_sum, sum_input


def views_on_rank(algorithm: str) -> list:
    """[base after all-reducing its transpose (5, 7) -> (7, 5) view, the slice big[3:10] and big
    after all-reducing the slice, whether each call returned its input, the inputs of the other
    collectives after the calls, and before them]."""
    import collectives
    import torch.distributed as dist
    from conftest import ALL_REDUCES, a2a_input, gather_input

    fn = getattr(collectives, ALL_REDUCES[algorithm])
    rank = dist.get_rank()
    base = sum_input("int", rank, (5, 7))
    view = base.t()  # (7, 5), not contiguous: its sum must land in base's memory
    same_view = fn(view) is view
    big = torch.full((12,), -1, dtype=torch.int64)
    big[3:10] = sum_input("int", rank, (7,))
    part = big[3:10]
    same_part = fn(part) is part
    x_rs = sum_input("int", rank, (6, 2))
    shard = gather_input(rank, 3)
    x_a2a = a2a_input(rank, [2, 3])
    before = [x_rs.clone(), shard.clone(), x_a2a.clone()]
    collectives.ring_reduce_scatter(x_rs)
    collectives.ring_all_gather(shard)
    collectives.all_to_all(x_a2a, [2, 3], [2, 3] if rank == 0 else [3, 3])
    return [base, view, big, same_view, same_part, [x_rs, shard, x_a2a], before]


def bad_sizes_on_rank() -> list[str]:
    """Calls whose sizes cannot fit on every rank alike; the name of what each raised."""
    import torch.distributed as dist
    from collectives import all_to_all, ring_all_gather, ring_reduce_scatter

    rank = dist.get_rank()
    rows = torch.arange(10 * 2).reshape(10, 2)
    calls = {
        "ring_reduce_scatter(x of 10 rows, sizes=[5, 4])": lambda: ring_reduce_scatter(rows, [5, 4]),
        "ring_reduce_scatter(x, sizes=[10]) on 2 ranks": lambda: ring_reduce_scatter(rows, [10]),
        "ring_reduce_scatter(0-d x)": lambda: ring_reduce_scatter(torch.tensor(3)),
        "ring_all_gather(shard of 3 rows, sizes=[2, 2])": lambda: ring_all_gather(rows[:3], [2, 2]),
        "ring_all_gather(shard, sizes=[3, 3, 3]) on 2 ranks": lambda: ring_all_gather(rows[:3], [3, 3, 3]),
        "all_to_all(x of 5 rows, [2, 2], [2, 2])": lambda: all_to_all(rows[:5], [2, 2], [2, 2]),
        "all_to_all(x, [2, 2], [3, 3]): own block 2 rows sent, 3 expected": lambda: all_to_all(rows[:4], [2, 2], [3, 3]),
        "all_to_all(x, [-1, 5], [2, 2])": lambda: all_to_all(rows[:4], [-1, 5], [2, 2]),
        # lengths right, sums right, own block consistent: only the sign check refuses it
        "all_to_all(x, a -1 split to the other rank, 5 rows kept)": lambda: all_to_all(
            rows[:4], [5, -1] if rank == 0 else [-1, 5], [5, 0] if rank == 0 else [0, 5]),
        "all_to_all(x, [4], [4]) on 2 ranks": lambda: all_to_all(rows[:4], [4], [4]),
    }
    raised = []
    for name, call in calls.items():
        try:
            call()
            raised.append(f"{name}: returned (rank {rank})")
        except Exception as e:  # noqa: BLE001  reported by name
            raised.append(f"{name}: {type(e).__name__}" if isinstance(e, ValueError) else
                          f"{name}: {type(e).__name__}, not ValueError (rank {rank})")
    return raised


@pytest.mark.points(4)
@pytest.mark.world_size(2)
def test_results_land_in_the_input_tensor_and_bad_sizes_raise(ranks):
    for algorithm in ("ring", "recursive_doubling"):
        for rank, (base, view, big, same_view, same_part, after, before) in enumerate(ranks.run(views_on_rank,
                                                                                                 algorithm)):
            where = f"{algorithm} all-reduce, rank {rank}"
            assert same_view and same_part, f"{where}: return the tensor you were given, summed in place"
            # the view's elements in its own (transposed) order are the tags of base's flat indices
            want_base = expected_sum(2, (5, 7))
            check_sum(view, want_base.t(), 2, f"{where}, transposed (7, 5) view: the view")
            check_sum(base, want_base, 2, f"{where}, transposed view: the (5, 7) tensor it views")
            want_big = torch.full((12,), -1, dtype=torch.int64)
            want_big[3:10] = expected_sum(2, (7,))
            assert torch.equal(big, want_big), (
                f"{where}, the slice big[3:10] of a 12-element tensor: big is {big.tolist()}, expected "
                f"{want_big.tolist()} (only the slice summed, the rest untouched)")
            for name, a, b in zip(("ring_reduce_scatter's x", "ring_all_gather's shard", "all_to_all's x"),
                                  after, before):
                assert torch.equal(a, b), f"{where}: {name} was changed by the call; leave inputs as they were"
    for rank, raised in enumerate(ranks.run(bad_sizes_on_rank)):  # last: a submission that does not check may hang
        wrong = [r for r in raised if not r.endswith(": ValueError")]
        assert not wrong, f"rank {rank}: expected ValueError from every call; " + "; ".join(wrong)
