"""GPU tier: two GPUs over NCCL. The student's ring_all_reduce on CUDA tensors against NCCL's own
all_reduce (the baseline, inside oracle()), 64 MiB of float32, both timed in the same run with
autograder.timing.measure on every rank (warm-up, CUDA events, mean of 20 repetitions, each on its
own input set copied into the buffer before it: 20 x 64 MiB = 1.3 GB a rank). Same S and n, so the ratio of
their bus bandwidths is the ratio of their times. The whole measurement runs in the ranks'
workers: it is their word, checked against nothing the judge clocks. Graded against
[perf.ring_busbw_vs_nccl] of assignment.toml for this hardware; with no bar for it (none is set
yet) the test is "not graded here", and on a machine with fewer than two GPUs too."""

from __future__ import annotations

import pytest
from conftest import check_sum, expected_sum

N = 16 * 2**20  # float32 elements: S = 64 MiB
REPS = 20  # one input set per repetition
CHECK = 2**20 + 1  # int64 elements of the exactness check, odd: uneven ring blocks


def busbw_on_rank() -> list:
    import torch
    import torch.distributed as dist
    from collectives import ring_all_reduce
    from conftest import sum_input

    from autograder.testing import oracle
    from autograder.timing import measure

    device = torch.device("cuda", torch.cuda.current_device())
    check = sum_input("int", dist.get_rank(), (CHECK,)).to(device)
    ring_all_reduce(check)  # exact first, on rank-tagged integers (this also opens the pair's NCCL channels)
    sets = [(torch.full((N,), float(i + 1), device=device),) for i in range(REPS)]  # each copied in before its call

    def summed(i, out):  # every rank holds i + 1: the sum over 2 ranks
        assert torch.equal(out, torch.full_like(out, 2.0 * (i + 1))), f"ring_all_reduce of input set {i} is wrong"

    mine = measure(ring_all_reduce, warmup=3, reps=REPS, device=device, inputs=sets, check=summed)
    with oracle():
        theirs = measure(lambda y: dist.all_reduce(y), warmup=3, reps=REPS, device=device, inputs=sets)
    return [check.cpu(), mine.graded_s, theirs.graded_s]


@pytest.mark.perf
@pytest.mark.points(4)
@pytest.mark.world_size(2, backend="nccl")
def test_ring_bus_bandwidth_against_nccl(ranks, perf):
    outs = ranks.run(busbw_on_rank)
    for rank, (check, _, _) in enumerate(outs):
        check_sum(check, expected_sum(2, (CHECK,)), 2, f"ring_all_reduce of {CHECK} int64 on CUDA, rank {rank}")
    mine = max(o[1] for o in outs)  # a collective ends when its slowest rank does
    theirs = max(o[2] for o in outs)
    nbytes, factor = 4 * N, 2 * (2 - 1) / 2
    print(f"64 MiB all-reduce on 2 GPUs: ring {mine * 1e3:.3f} ms, busbw {nbytes / mine * factor / 1e9:.1f} GB/s; "
          f"NCCL {theirs * 1e3:.3f} ms, busbw {nbytes / theirs * factor / 1e9:.1f} GB/s")
    perf.record("ring_busbw_vs_nccl", theirs / mine)
