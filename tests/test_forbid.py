"""Forbidden names (autograder/worker/forbid.py): a forbidden module has the callables it defines
patched, and nothing it merely imported (a forbidden `hta.common.trace_parser` once patched
`pathlib.Path` in the student's own modules, since that module imports it)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from autograder.worker import forbid


@pytest.fixture
def fake_modules():
    lib = types.ModuleType("fakelib_forbid")
    exec("from pathlib import Path\nimport json\ndumps = json.dumps\ndef analyze(x):\n    return 42\n", lib.__dict__)
    student = types.ModuleType("studentpkg_forbid")
    student.Path, student.dumps, student.analyze = Path, json.dumps, lib.analyze
    sys.modules["fakelib_forbid"], sys.modules["studentpkg_forbid"] = lib, student
    yield lib, student
    del sys.modules["fakelib_forbid"], sys.modules["studentpkg_forbid"]


def test_a_forbidden_module_patches_what_it_defines_and_its_aliases(fake_modules):
    lib, student = fake_modules
    patches = forbid.apply(["fakelib_forbid"], "studentpkg_forbid")
    try:
        with pytest.raises(RuntimeError, match="forbidden"):
            student.analyze(1)
        with pytest.raises(RuntimeError, match="forbidden"):
            lib.analyze(1)
    finally:
        forbid.restore(patches)
    assert student.analyze(1) == 42


def test_a_forbidden_module_leaves_the_names_it_imported_alone(fake_modules):
    lib, student = fake_modules
    patches = forbid.apply(["fakelib_forbid"], "studentpkg_forbid")
    try:
        assert student.Path is Path and lib.Path is Path
        assert student.dumps is json.dumps and lib.dumps is json.dumps
    finally:
        forbid.restore(patches)
