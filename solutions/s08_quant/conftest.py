"""Shared fixtures for s08_quant: independent oracles written from the handout's definitions.

Each oracle loops over groups or tiles with plain slicing (the package's code reshapes and pads),
computes in the input's dtype (float64 in the exactness tests), and uses torch's own float8 cast
for FP8 element rounding. Nothing here is copied from the reference's output.
"""

from __future__ import annotations  # noqa: I001 (the grader's imports first, then torch)

import itertools
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from autograder.testing import course_model_dir, tolerances

# Small tensors: one thread is fast enough and immune to a busy grading machine.
torch.set_num_threads(1)


def int_qrange(bits: int, symmetric: bool) -> tuple[int, int]:
    """The integer grid of the handout: symmetric drops the code -2^(b-1)."""
    if symmetric:
        return -(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


def int_groups(shape: tuple[int, ...], granularity: str, group_size: int | None) -> list[tuple]:
    """Index tuples, one per group sharing a scale, and the scale index of each: [(elems, sidx)]."""
    *lead, k = shape
    rows = list(itertools.product(*[range(n) for n in lead]))  # [()] when x is 1-D
    if granularity == "tensor":
        return [((...,), (0,) * len(shape))]
    out = []
    for r in rows:
        if granularity == "channel":
            out.append(((*r, slice(0, k)), (*r, 0)))
        else:
            for j in range(math.ceil(k / group_size)):
                out.append(((*r, slice(j * group_size, min((j + 1) * group_size, k))), (*r, j)))
    return out


def int_oracle(x: torch.Tensor, bits: int, symmetric: bool, granularity: str, group_size: int | None = None):
    """(q float, scale, zero float, deq) by the handout's formulas, group by group, in x's dtype."""
    qmin, qmax = int_qrange(bits, symmetric)
    k = x.shape[-1]
    sshape = {"tensor": (1,) * x.dim(), "channel": (*x.shape[:-1], 1),
              "group": (*x.shape[:-1], math.ceil(k / group_size) if group_size else 0)}[granularity]
    scale = torch.zeros(sshape, dtype=x.dtype)
    zero = torch.zeros(sshape, dtype=x.dtype)
    q = torch.zeros_like(x)
    for elems, sidx in int_groups(tuple(x.shape), granularity, group_size):
        g = x[elems]
        lo, hi = min(g.min(), torch.zeros((), dtype=x.dtype)), max(g.max(), torch.zeros((), dtype=x.dtype))
        s = (torch.maximum(-lo, hi) if symmetric else hi - lo) / qmax
        s = s if s > 0 else torch.ones((), dtype=x.dtype)
        z = torch.zeros((), dtype=x.dtype) if symmetric else torch.round(-lo / s).clamp(qmin, qmax)
        scale[sidx], zero[sidx] = s, z
        q[elems] = (torch.round(g / s) + z).clamp(qmin, qmax)
    deq = torch.zeros_like(x)
    for elems, sidx in int_groups(tuple(x.shape), granularity, group_size):
        deq[elems] = (q[elems] - zero[sidx]) * scale[sidx]
    return q, scale, zero, deq


def fp8_oracle(x: torch.Tensor, tile: tuple[int, int]):
    """(scale grid, dequantized x) tile by tile: scale = amax / 448 in float32 (1 if 0), the
    element rounding by torch's cast of the clamped quotient."""
    m, k = x.shape
    tm, tk = tile
    scale = torch.zeros(math.ceil(m / tm), math.ceil(k / tk), dtype=torch.float32)
    deq = torch.zeros_like(x)
    for i in range(scale.shape[0]):
        for j in range(scale.shape[1]):
            block = x[i * tm : (i + 1) * tm, j * tk : (j + 1) * tk]
            amax = block.abs().max()
            s = amax / 448.0 if amax > 0 else torch.ones(())
            scale[i, j] = s
            stored = (block / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
            deq[i * tm : (i + 1) * tm, j * tk : (j + 1) * tk] = stored.to(torch.float32) * s
    return scale, deq


@pytest.fixture(scope="session")
def course_model() -> dict[str, torch.Tensor]:
    """The course LLaMA's tensors (float32) read with safetensors; not graded where it is absent."""
    folder = course_model_dir()
    if folder is None:
        pytest.skip("datasets/models/course-llama is not built")
    from safetensors.torch import load_file

    return {name: t.float() for name, t in load_file(folder / "model.safetensors").items()}


@pytest.fixture
def oracles() -> SimpleNamespace:
    """The oracles above: oracles.int(x, bits, symmetric, granularity, group_size),
    oracles.int_qrange(bits, symmetric), oracles.fp8(x, tile)."""
    return SimpleNamespace(int=int_oracle, int_qrange=int_qrange, fp8=fp8_oracle)


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES
