"""Shared by tests/ and hidden/: where the kernels run.

Without a GPU, Triton kernels run in its interpreter on CPU tensors. TRITON_INTERPRET must be set
before triton is first imported; pytest loads this file before any test module imports the
package, so setting it here is early enough.
"""

import os
from pathlib import Path

import pytest
import torch
from autograder.testing import tolerances

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def device() -> str:
    """The device small-shape tests run on: the GPU when there is one, else the CPU interpreter."""
    return "cuda" if torch.cuda.is_available() else "cpu"


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]
    (the handout prints the same table), for torch.testing.assert_close(actual, expected, **tol(name))."""
    return _TOLERANCES
