"""The course's pytest marks, registered wherever pytest runs in the course's environment.

The judge registers them for graded runs; the `pytest11` entry point in pyproject.toml loads this
module for every other pytest run (a student's quick `python -m pytest tests` in an assignment
folder), so no run warns "Unknown pytest.mark.points" once per test; in such a run it also
registers the quick loop's fixtures and skips (autograder/local.py).
"""

from __future__ import annotations

import pytest

MARKS = (
    "points(n): points this test is worth (default 1)",
    "gpu: needs a CUDA GPU; not graded on machines without one",
    "perf: a performance test graded against hardware thresholds",
    ("world_size(n, backend='gloo'): a multi-rank test; its `ranks` fixture runs code on n ranks "
     "(backend 'nccl': one GPU per rank, not graded with fewer)"),
    ("kernels(*modules): Triton kernels of these modules must run (overrides the spec's require_kernels; "
     "no argument: none required)"),
)


def register(config: pytest.Config) -> None:
    for mark in MARKS:
        config.addinivalue_line("markers", mark)


def pytest_configure(config: pytest.Config) -> None:
    register(config)
    from autograder import local

    if not local.graded(config):  # the student's quick loop: GPU skips, local ranks and perf
        config.pluginmanager.register(local.LocalRun(), "autograder-local")
