"""Shared by tests/ and hidden/: where the kernels run.

Without a GPU, Triton kernels run in its interpreter on CPU tensors. TRITON_INTERPRET must be set
before triton is first imported; pytest loads this file before any test module imports the
package, so setting it here is early enough.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def device() -> str:
    """The device small-shape tests run on: the GPU when there is one, else the CPU interpreter."""
    return "cuda" if torch.cuda.is_available() else "cpu"
