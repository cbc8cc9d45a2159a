"""CUDA graphs on the GPU: replays equal eager runs of the padded batch, bitwise (tolerance "graph
replay": the same kernels on the same inputs), with no Python run per replay; the three classic
failures (a new batch size, a host sync in the capture, outputs overwritten by the next replay)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import in_worker

SIZES = [1, 2, 4, 8]
WIDTH = 256


def mlp_weights(device: str = "cuda"):
    g = torch.Generator().manual_seed(0)
    w1 = (torch.randn(4 * WIDTH, WIDTH, generator=g) / WIDTH**0.5).to(device)
    w2 = (torch.randn(WIDTH, 4 * WIDTH, generator=g) / (4 * WIDTH) ** 0.5).to(device)
    return w1, w2


def mlp(x, w1, w2):
    return torch.nn.functional.linear(torch.nn.functional.silu(torch.nn.functional.linear(x, w1)), w2)


def batch(b: int, seed: int, device: str = "cuda"):
    return torch.randn(b, WIDTH, generator=torch.Generator().manual_seed(seed)).to(device)


@in_worker
def graphed_runs(batches: list) -> dict:
    """In the worker: capture the MLP for SIZES, then step each batch; counts the MLP's Python calls."""
    from traceprof import GraphedStep

    w1, w2 = mlp_weights()
    calls = [0]

    def fn(x):
        calls[0] += 1
        return mlp(x, w1, w2)

    step = GraphedStep(fn, batch(1, 0), SIZES)
    after_capture = calls[0]
    outs = [step.step(batch(b, seed)).cpu() for seed, b in enumerate(batches)]
    return {"outs": [o.tolist() for o in outs], "python_calls_in_steps": calls[0] - after_capture}


@in_worker
def kept_output() -> dict:
    """A result kept across the next replay (of another size, same pool) must not change."""
    from traceprof import GraphedStep

    w1, w2 = mlp_weights()
    step = GraphedStep(lambda x: mlp(x, w1, w2), batch(1, 0), SIZES)
    first = step.step(batch(4, 1))
    before = first.cpu().clone()
    step.step(batch(2, 2))
    step.step(batch(4, 3))
    return {"same": bool(torch.equal(before, first.cpu()))}


CAPTURE_WITH_SYNC = """
import json, sys, torch
from traceprof import GraphCaptureError, GraphedStep
def fn(x):
    if x.sum().item() > 1e30:  # a host sync: .item() inside the step
        return x
    return x * 2
try:
    GraphedStep(fn, torch.zeros(1, 8, device="cuda"), [1, 2])
    print(json.dumps({"raised": None}))
except Exception as err:
    print(json.dumps({"raised": type(err).__name__, "is_capture_error": isinstance(err, GraphCaptureError),
                      "chained": err.__cause__ is not None, "message": str(err)}))
"""


@in_worker
def capture_with_sync() -> dict:
    """In a subprocess of the worker: a failed capture leaves the CUDA context unusable for the rest
    of the process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, "-c", CAPTURE_WITH_SYNC], capture_output=True, text=True, env=env,
                          timeout=120, cwd=os.getcwd())
    last = (done.stdout.strip().splitlines() or ["{}"])[-1]
    try:
        return json.loads(last)
    except json.JSONDecodeError:
        return {"raised": "crash", "stderr": done.stderr[-2000:]}


def eager_padded(b: int, seed: int):
    """The judge's own eager run of the batch padded with zero rows to its bucket."""
    s = min(x for x in SIZES if x >= b)
    w1, w2 = mlp_weights()
    x = torch.zeros(s, WIDTH, device="cuda")
    x[:b] = batch(b, seed)
    return mlp(x, w1, w2)[:b].cpu()


@pytest.mark.gpu
@pytest.mark.points(4)
def test_replays_equal_eager_runs_of_the_padded_batch_without_running_python(tol):
    exact = tol("graph replay")
    batches = [1, 3, 8, 2, 5, 4]
    got = graphed_runs(batches)
    for seed, b in enumerate(batches):
        out = torch.tensor(got["outs"][seed])
        assert out.shape == (b, WIDTH), f"batch {b}: shape {tuple(out.shape)}"
        torch.testing.assert_close(out, eager_padded(b, seed), rtol=exact["rel"], atol=exact["abs"],
                                   msg=f"batch {b}: not the eager result of the padded batch")
    assert got["python_calls_in_steps"] == 0, "step() ran the step function in Python: not a replay"


@pytest.mark.gpu
@pytest.mark.points(3)
def test_an_output_survives_the_next_replay():
    assert kept_output()["same"], "the output was a view of the graph's pool: the next replay overwrote it"


@pytest.mark.gpu
@pytest.mark.points(3)
def test_a_host_sync_inside_the_capture_raises_a_clear_error():
    got = capture_with_sync()
    assert got.get("is_capture_error"), f"expected GraphCaptureError, got {got}"
    assert got["chained"], "chain the original CUDA error (raise ... from err)"
