"""Weight sync between two processes (the trainer's rank 0, the worker's rank 1, gloo), the bytes a
sync moves, and the worker's refusals. The oracle: the judge trains the same model with the same
steps and asks transformers for its greedy tokens."""

from __future__ import annotations

import pytest
import torch
from conftest import bad_header_on_rank, draft_dir, sync_on_rank
from sync_oracle import LR, PROMPT, hf_greedy, train_versions, training_batch

from posttrain import RolloutWorker


@pytest.mark.points(4)
@pytest.mark.world_size(2)
def test_two_process_sync_keeps_the_worker_on_the_trainers_policy(ranks):
    folder, steps = draft_dir(), 3
    trainer, worker = ranks.run(sync_on_rank, folder, training_batch(), steps, LR, PROMPT, 8)
    for version, model in train_versions(folder, steps):
        param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # tied weights once
        count = len(list(model.parameters()))
        want = hf_greedy(model, 8)
        assert trainer[version - 1] == [version, param_bytes, count], (
            f"sync {version}: send_weights reported [version, bytes, tensors] = {trainer[version - 1]}, expected "
            f"[{version}, {param_bytes}, {count}] (every parameter once, float32; the tied lm_head is not sent twice)")
        assert worker[version - 1][:3] == [version, param_bytes, count], (
            f"sync {version}: receive_weights reported {worker[version - 1][:3]}, expected [{version}, {param_bytes}, {count}]")
        assert worker[version - 1][3] == want, (
            f"after sync {version} the worker's greedy tokens {worker[version - 1][3]} differ from transformers' "
            f"{want} on the trainer's model (SGD step {version}, lr {LR})")


def state_of(model) -> dict:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


@pytest.mark.points(2)
def test_a_sync_reports_the_parameter_bytes_and_bumps_the_version():
    folder = draft_dir()
    worker = RolloutWorker(folder)
    for version, model in train_versions(folder, 1):
        param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        report = worker.load_weights(state_of(model), version)
        assert (report.version, report.bytes_moved, report.num_tensors) == (version, param_bytes, 29), (
            f"load_weights(version {version}) reported {report}, expected version {version}, {param_bytes} bytes, 29 tensors")
        assert worker.version == version, f"after load_weights(version {version}) the worker says version {worker.version}"
    with pytest.raises(RuntimeError, match="version"):
        worker.generate([PROMPT], 4, 0)


@pytest.mark.points(2)
def test_an_out_of_order_or_incomplete_sync_is_refused_and_changes_nothing():
    folder = draft_dir()
    worker = RolloutWorker(folder)
    [(_, first), (_, second)] = [(v, state_of(m)) for v, m in train_versions(folder, 2)]
    worker.load_weights(first, 2)
    before = worker.generate([PROMPT], 6, 2)[0]
    with pytest.raises(ValueError):
        worker.load_weights(second, 2)       # not above the current version
    with pytest.raises(ValueError):
        worker.load_weights(second, 1)       # older
    partial = dict(second)
    partial.pop("model.norm.weight")
    with pytest.raises(ValueError):
        worker.load_weights(partial, 3)      # a weight missing
    assert worker.version == 2, f"refused syncs changed the version to {worker.version}"
    after = worker.generate([PROMPT], 6, 2)[0]
    assert after == before, f"a refused sync changed the worker's weights: greedy tokens {before} became {after}"


@pytest.mark.points(1)
@pytest.mark.world_size(2)
def test_a_header_announcing_more_tensors_than_the_engine_has_is_refused(ranks):
    """The trainer announces 30 tensors (the tied lm_head sent a second time); the engine expects 29."""
    _, worker = ranks.run(bad_header_on_rank, draft_dir(), 30)
    assert worker == ["refused", 0], (
        f"receive_weights after a header [1, 30] (this engine expects 29 tensors): {worker[0]}, version "
        f"{worker[1]}; expected a ValueError and version 0 kept")
