"""The five parts of the training state one by one: capture_training_state is a copy (training on
after it changes nothing in it), both generators come back, and the loader resumes at any position,
across an epoch's end, in the judge's order (programs.judge_order: the handout's contract)."""

from __future__ import annotations

import pytest
import torch
from programs import BATCH, SAMPLES, data, fresh, judge_order, oracle, step

from autograder.testing import in_worker


@in_worker
def capture_then_train(seed: int, at: int, more: int) -> dict:
    from faulttol import capture_training_state, ResumableLoader

    torch.set_num_threads(1)
    x, y = data(seed)
    net, opt, sched = fresh(seed)
    loader = ResumableLoader(SAMPLES, BATCH, seed)
    for _ in range(at):
        step(net, opt, sched, x, y, loader.next_indices())
    state = capture_training_state(net, opt, sched, loader, at)
    for _ in range(more):
        step(net, opt, sched, x, y, loader.next_indices())
    return {"model": state["model"], "optimizer": state["optimizer"]["state"], "scheduler": state["scheduler"],
            "loader": state["loader"], "step": state["step"], "keys": sorted(state)}


@pytest.mark.points(2)
def test_captured_state_is_a_copy_of_the_step_it_was_taken_at():
    torch.set_num_threads(1)
    got, want = capture_then_train(4, 3, 3), oracle(4, 3, keep=(3,))[3]
    assert got["keys"] == ["loader", "model", "optimizer", "rng", "scheduler", "step"], got["keys"]
    assert got["step"] == 3 and got["loader"] == {"epoch": 0, "cursor": 3 * BATCH}, (got["step"], got["loader"])
    assert got["scheduler"]["last_epoch"] == 3, f"scheduler state after 3 steps: {got['scheduler']}"
    for name, tensor in want["model"].items():
        assert torch.equal(got["model"][name], tensor), f"model[{name!r}] changed after the capture (not a copy)"
    for i, state in want["optimizer"].items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(got["optimizer"][i][key], state[key]), f"optimizer state {i} {key} changed after the capture"


@in_worker
def draws_around_restore(seed: int) -> dict:
    import random

    from faulttol import capture_rng, restore_rng

    torch.manual_seed(seed)
    random.seed(seed)
    saved = capture_rng()
    first = (torch.rand(6).tolist(), [random.random() for _ in range(3)])
    torch.manual_seed(seed + 1)
    random.seed(seed + 1)
    restore_rng(saved)
    return {"first": first, "again": (torch.rand(6).tolist(), [random.random() for _ in range(3)])}


@pytest.mark.points(1)
def test_both_generators_draw_the_same_after_restore():
    out = draws_around_restore(5)
    assert out["again"][0] == out["first"][0], "torch's generator: other draws after restore_rng"
    assert out["again"][1] == out["first"][1], "Python's random: other draws after restore_rng"


@in_worker
def loader_resumed_at(seed: int, at: int, more: int) -> list[list[int]]:
    from faulttol import ResumableLoader

    first = ResumableLoader(SAMPLES, BATCH, seed)
    for _ in range(at):
        first.next_indices()
    second = ResumableLoader(SAMPLES, BATCH, seed)
    second.load_state_dict(first.state_dict())
    return [second.next_indices() for _ in range(more)]


@pytest.mark.points(1)
@pytest.mark.parametrize("at", [0, 5, 6, 7, 13])
def test_loader_resumes_at_any_position_across_epochs(at):
    want = judge_order(9, at + 8)[at:]
    got = loader_resumed_at(9, at, 8)
    assert got == want, f"loader saved after {at} batches: the next 8 batches differ from the contract's order"


@in_worker
def loader_batches(size: int, batch: int, seed: int, count: int) -> list[list[int]]:
    from faulttol import ResumableLoader

    loader = ResumableLoader(size, batch, seed)
    return [loader.next_indices() for _ in range(count)]


@pytest.mark.points(1)
@pytest.mark.parametrize(("size", "batch"), [(12, 4), (12, 12), (10, 3)])
def test_loader_keeps_a_last_batch_that_fills_exactly(size, batch):
    """drop_last drops only an incomplete batch: with size a multiple of batch, every index of an
    epoch is served (the contract's order, computed here)."""
    want, epoch = [], 0
    while len(want) < 7:
        perm = torch.randperm(size, generator=torch.Generator().manual_seed(3 + epoch)).tolist()
        want += [perm[i:i + batch] for i in range(0, size - batch + 1, batch)]
        epoch += 1
    got = loader_batches(size, batch, 3, 7)
    assert got == want[:7], f"size {size}, batch {batch}: the first 7 batches {got} differ from the contract's {want[:7]}"
