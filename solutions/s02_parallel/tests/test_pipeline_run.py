"""A pipeline on gloo ranks: an MLP of 2p layers split over p stages (two layers each), trained one
step with a schedule. Oracle: the same MLP in one process, fp32, loss = the mean over micro-batches
of the MSE of each micro-batch; its gradients and per-micro-batch losses must come out of the
stages. A forward hook on each stage records the order in which it ran forwards and backwards, which
must be the schedule's; the point-to-point calls are counted (a diagnosis: one message per
micro-batch per neighbour and direction, no collective).
"""

from __future__ import annotations

import pytest
import torch
from rank_programs import MICRO, WIDTH, check_pipeline, mlp_params, pipeline_on_rank


@pytest.mark.points(8)
@pytest.mark.world_size(2)
def test_1f1b_and_afab_gradients_equal_one_process_on_two_stages(ranks, tol):
    weights, biases = mlp_params(4, seed=2)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(4 * MICRO, WIDTH, generator=g), torch.randn(4 * MICRO, WIDTH, generator=g)
    runs = [("1f1b", 4, None, None), ("afab", 3, None, None), ("1f1b", 1, None, None)]
    results = ranks.run(pipeline_on_rank, weights, biases, x, y, runs)
    check_pipeline(results, runs, weights, biases, x, y, tol)
