"""DDP's harder cases on two gloo ranks, against one process (3 SGD steps, lr 0.1): a parameter
used on one rank only (its bucket must still be all-reduced, with the other rank's zeros, and the
average is half that rank's gradient), a parameter unused on every rank (its gradient averages to
zeros and nothing hangs, and the buckets rebuilt with the unused ones first in the ready order),
and bf16 compute."""

from __future__ import annotations

import pytest
import torch
from rank_programs import ddp_on_rank, draw_case, one_process_sgd
from checks import DDP_CAP as CAP
from checks import DDP_LR as LR
from checks import check_overlap, check_params, torch_buckets


@pytest.mark.points(6)
@pytest.mark.world_size(2)
def test_ddp_reduces_buckets_with_unused_parameters(ranks, tol):
    for flags in ([True, False], [False, False]):
        case = draw_case(seed=13, steps=3, batch=8)
        results = ranks.run(ddp_on_rank, case, flags, CAP, LR, "float32")
        want = one_process_sgd(case, 2, flags, LR)
        check_params(results, want, tol("DDP vs one process, fp32"), f"extra layer used per rank: {flags}")
        for rank, res in enumerate(results):
            for step, events in enumerate(res["events"]):
                n = len(res["buckets"][step])
                assert sum(e[0] == "all_reduce" for e in events) == n, (
                    f"flags {flags}, rank {rank}, step {step + 1}: want one all-reduce per bucket ({n}): {events}")
        if not any(flags):  # unused on every rank: marked ready at the first hook, before its own parameter
            ready = results[0]["ready"][0]
            unused = [i for i in range(len(case["weights"])) if i not in ready]
            order = unused + ready
            rebuilt = torch_buckets([w.numel() for w in case["weights"]], CAP, order)
            for rank, res in enumerate(results):
                assert res["buckets"][1] == rebuilt, (
                    f"rank {rank}: buckets after step 1 {res['buckets'][1]}, want {rebuilt}: the ready order "
                    f"{order} puts the unused parameters {unused} first (the first hook marks them ready "
                    f"before its own parameter), then rank 0's gradients in the order they were computed")


@pytest.mark.points(4)
@pytest.mark.world_size(2)
def test_ddp_in_bf16_equals_one_process_in_bf16(ranks, tol):
    case = draw_case(seed=17, steps=3, batch=8)
    results = ranks.run(ddp_on_rank, case, [True, True], CAP // 2, LR, "bfloat16")  # bf16: half the bytes
    check_params(results, one_process_sgd(case, 2, [True, True], LR, dtype=torch.bfloat16),
                 tol("DDP vs one process, bf16"), "bf16 DDP")
    for rank, res in enumerate(results):
        for step, events in enumerate(res["events"]):
            check_overlap(events, len(res["buckets"][step]), f"bf16, rank {rank}, step {step + 1}")
