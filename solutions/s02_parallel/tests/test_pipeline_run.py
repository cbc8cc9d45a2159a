"""A pipeline on gloo ranks: an MLP of 2p layers split over p stages (two layers each), trained one
step with a schedule. Oracle: the same MLP in one process, fp32, loss = the mean over micro-batches
of the MSE of each micro-batch; its gradients and per-micro-batch losses must come out of the
stages. A forward hook on each stage records the order in which it ran forwards and backwards, which
must be the schedule's; the point-to-point calls are counted (one message per micro-batch per
neighbour and direction, no collective). Each rank is given only its own stage's layers (and the
inputs or targets where its stage reads them), drawn from a seed no rank sees, and each message
must carry what the neighbour needs: the stage's output for one micro-batch (forward) or its input
gradient (backward), checked against the one-process MLP. Other data of the right size fails.
"""

from __future__ import annotations

import pytest
from rank_programs import check_pipeline, pipeline_case, run_pipeline


@pytest.mark.points(8)
@pytest.mark.world_size(2)
def test_1f1b_and_afab_gradients_equal_one_process_on_two_stages(ranks, tol):
    weights, biases, x, y = pipeline_case(4, micro_batches=4)
    runs = [("1f1b", 4, None, None), ("afab", 3, None, None), ("1f1b", 1, None, None)]
    results = run_pipeline(ranks, weights, biases, x, y, runs)
    check_pipeline(results, runs, weights, biases, x, y, tol)
