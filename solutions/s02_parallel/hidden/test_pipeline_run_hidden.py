"""The pipeline on four gloo ranks: fewer micro-batches than stages, one micro-batch, a hand-written
schedule with backwards in reverse order, one with forwards out of order, and stages placed on the ranks
in reverse (stage_ranks); every stage is handed all five micro-batches of inputs and targets, more than
most schedules run (the loss is divided by the forwards run, not by the targets given);
oracle: the same MLP in one process (rank_programs.one_process), which also gives what each message
must carry (crossed.stage_boundaries)."""

from __future__ import annotations

import pytest
from rank_programs import check_pipeline, pipeline_case, run_pipeline

REVERSED_AFAB = ["F0 F1 F2 B2 B1 B0"] * 4  # legal: each stage's backwards follow the next stage's
FORWARDS_OUT_OF_ORDER = ["F1 F0 B1 B0"] * 4  # legal too: the losses still come back in micro-batch order


@pytest.mark.points(5)
@pytest.mark.world_size(4)
def test_pipeline_of_four_stages_with_few_microbatches_and_custom_placement(ranks, tol):
    weights, biases, x, y = pipeline_case(8, micro_batches=5)
    runs = [("1f1b", 2, None, None), ("1f1b", 1, None, None), ("afab", 5, None, None),
            ("1f1b", 5, None, [3, 2, 1, 0]), ("afab", 3, REVERSED_AFAB, [1, 3, 0, 2]),
            ("afab", 2, FORWARDS_OUT_OF_ORDER, None)]
    results = run_pipeline(ranks, weights, biases, x, y, runs)
    check_pipeline(results, runs, weights, biases, x, y, tol)
