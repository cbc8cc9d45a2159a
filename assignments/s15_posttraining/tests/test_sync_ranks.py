"""Weight sync between two processes: rank 0 (the trainer) takes one SGD step and sends its weights,
rank 1 (the rollout worker on the P1 engine) receives them and generates greedily; its tokens must
be transformers' greedy tokens from the judge's own copy of the trained model."""

from __future__ import annotations

import pytest
from conftest import draft_dir, sync_on_rank
from sync_oracle import LR, PROMPT, hf_greedy, train_versions, training_batch


@pytest.mark.points(3)
@pytest.mark.world_size(2)
def test_one_sync_between_two_processes(ranks):
    folder = draft_dir()
    trainer, worker = ranks.run(sync_on_rank, folder, training_batch(), 1, LR, PROMPT, 6)
    [(version, model)] = list(train_versions(folder, 1))
    want = hf_greedy(model, 6)
    assert trainer[0][0] == 1 and worker[0][0] == 1, f"send/receive reported versions {trainer[0][0]}, {worker[0][0]}, expected 1"
    assert worker[0][3] == want, (f"after one sync the worker's greedy tokens {worker[0][3]} differ from transformers' "
                                  f"{want} on the trainer's model (one SGD step, lr {LR})")
