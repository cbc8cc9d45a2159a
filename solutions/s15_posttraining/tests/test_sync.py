"""Weight sync in one process: the judge trains transformers' model, the worker (on the P1 engine)
loads each version; after every sync the worker's greedy tokens equal transformers' own greedy
tokens from the trained model."""

from __future__ import annotations

import pytest
import torch
from conftest import draft_dir
from sync_oracle import PROMPT, hf_greedy, train_versions

from posttrain import RolloutWorker, StaleWeightsError


@pytest.mark.points(3)
def test_worker_generates_what_the_trained_model_generates():
    folder = draft_dir()
    worker = RolloutWorker(folder)
    for version, model in train_versions(folder, steps=2):
        report = worker.load_weights({k: v.detach().clone() for k, v in model.named_parameters()}, version)
        assert report.version == version, f"sync {version}: SyncReport.version is {report.version}"
        got, want = worker.generate([PROMPT], 8, version)[0], hf_greedy(model, 8)
        assert got == want, (f"after sync {version} (SGD step {version} of the draft model, lr 0.05) the "
                             f"worker's greedy tokens {got} differ from transformers' {want}")


@pytest.mark.points(2)
def test_generate_with_a_stale_version_is_refused():
    folder = draft_dir()
    worker = RolloutWorker(folder)
    [(version, model)] = list(train_versions(folder, steps=1))
    worker.load_weights({k: v.detach().clone() for k, v in model.named_parameters()}, version)
    with pytest.raises(RuntimeError, match="version"):  # StaleWeightsError derives from RuntimeError
        worker.generate([PROMPT], 4, 0)
    assert worker.generate([PROMPT], 4, 1)[0] == hf_greedy(model, 4), "generate with the current version (1) must run"
    assert issubclass(StaleWeightsError, RuntimeError)
