"""DDP on two gloo ranks against one process (fp32, 3 SGD steps, lr 0.1): the same global batch
split across the ranks, gradients averaged. Rank 1 starts from noise: DDP must broadcast rank 0's
weights. Also checked from the same run: the buckets (torch's own bucketing as the oracle) before
and after the rebuild in rank 0's gradient-ready order, and the overlap: every bucket's all-reduce
is launched asynchronously from the backward pass, the first before the backward's last gradient
is computed, and nothing waits for one before the backward ends."""

from __future__ import annotations

import pytest
import torch
from checks import DDP_CAP as CAP
from checks import DDP_LR as LR
from checks import check_overlap, check_params, torch_buckets
from rank_programs import ddp_on_rank, draw_case, one_process_sgd


def numels_of(weights: list[torch.Tensor]) -> list[int]:
    return [w.numel() for w in weights]


@pytest.mark.points(10)
@pytest.mark.world_size(2)
def test_ddp_equals_one_process_and_overlaps_backward(ranks, tol):
    case = draw_case(seed=7, steps=3, batch=8)
    results = ranks.run(ddp_on_rank, case, [True, True], CAP, LR, "float32")
    check_params(results, one_process_sgd(case, 2, [True, True], LR), tol("DDP vs one process, fp32"), "fp32 DDP")
    numels = numels_of(case["weights"])
    first = torch_buckets(numels, CAP, list(range(len(numels) - 1, -1, -1)))
    rebuilt = torch_buckets(numels, CAP, results[0]["ready"][0])
    for rank, res in enumerate(results):
        assert res["buckets"][0] == first, f"rank {rank}: first-step buckets {res['buckets'][0]}, want {first}"
        assert res["buckets"][1] == rebuilt, (f"rank {rank}: buckets after step 1 {res['buckets'][1]}, want "
                                              f"{rebuilt} (rank 0's ready order {results[0]['ready'][0]})")
        for step, events in enumerate(res["events"]):
            check_overlap(events, len(res["buckets"][step]), f"rank {rank}, step {step + 1}")
