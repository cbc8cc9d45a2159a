"""The tamper scan: each construct that reaches into the grader or torch's private state is flagged,
each evasion a student could try after reading the scan is flagged too, and nothing the course
itself wrote is (references, given packages, stubs, wrong-approach submissions, broken variants).
Pure AST work: no grading here (tests/test_held.py grades)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from autograder.authoring.mutants import load_mutants
from autograder.host.render import given_packages
from autograder.host.results import FAILED, HELD, MANUAL, NOT_GRADED, PASSED, ExpectedTest, TestResult
from autograder.host.scan import hold_flagged, scan_package, scan_source

REPO = Path(__file__).resolve().parent.parent
TAMPERING = Path(__file__).parent / "fixtures" / "tampering"
WRONG_APPROACH = Path(__file__).parent / "fixtures" / "wrong_approach"

# (source, a word the finding must contain): each is flagged on the line of its last statement
FLAGGED = {
    "grader import": ("from autograder.worker import accounting", "grader"),
    "pytest import": ("import pytest", "test framework"),
    "pluggy import": ("import pluggy", "plugin system"),
    "sys.modules": ("import sys\nm = sys.modules['x']", "sys.modules"),
    "sys.modules through an alias": ("import sys as s\nm = s.modules", "sys.modules"),
    "sys passed around": ("import sys\nf(sys)", "module sys"),
    "from sys import modules": ("from sys import modules", "sys.modules"),
    "from sys import *": ("from sys import *", "sys.*"),
    "sys through os": ("import os\nm = os.sys.modules", "sys"),
    "sys through a private alias": ("import collections\nm = collections._sys", "sys"),
    "__import__": ("m = __import__('sys')", "__import__"),
    "importlib": ("from importlib import import_module", "importlib"),
    "pkgutil.resolve_name": ("import pkgutil", "pkgutil"),
    "pydoc.locate": ("from pydoc import locate", "pydoc"),
    "runpy": ("import runpy", "runpy"),
    "unittest.mock": ("from unittest import mock", "mock"),
    "logging.config": ("import logging.config", "logging.config"),
    "timeit runs strings": ("import timeit", "timeit"),
    "getattr with a built name": ("import torch\nx = getattr(torch, '_' + 'C')", "computed name"),
    "getattr with a literal private name": ("import torch\nx = getattr(torch, '_C')", "_C"),
    "getattr on a parameter": ("def f(o, n):\n    return getattr(o, n)", "computed name"),
    "getattr over dir()": ("def f(m):\n    for n in dir(m):\n        getattr(m, n)", "computed name"),
    "setattr with a computed name": ("def f(o, n, v):\n    setattr(o, n, v)", "computed name"),
    "getattr aliased": ("g = getattr", "getattr around as a value"),
    "getattr in partial": ("import functools\nf = functools.partial(getattr, obj)", "getattr around"),
    "getattr in map": ("xs = list(map(getattr, objs, names))", "getattr around"),
    "attrgetter with a built name": ("import operator\nf = operator.attrgetter('_' + 'C')", "attrgetter"),
    "attrgetter of a private path": ("from operator import attrgetter\nf = attrgetter('_C._x')", "attrgetter"),
    "methodcaller": ("import operator\nf = operator.methodcaller(n)", "methodcaller"),
    "object.__getattribute__": ("x = object.__getattribute__(m, n)", "__getattribute__"),
    "self.__getattr__ unbound name": ("x = super().__getattr__(n)", "__getattr__"),
    "a getattr in self's clothes": ("def f(self, n):\n    return getattr(self, n)", "computed name"),
    "self rebound in a method": ("class A:\n    def f(self, n):\n        self = n\n        return getattr(self, n)",
                                 "computed name"),
    "module __dict__": ("import torch\nx = torch.__dict__", "__dict__"),
    "vars": ("x = vars(m)['_C']", "vars"),
    "globals written": ("globals()['x'] = 1", "globals"),
    "locals": ("x = locals()", "locals"),
    "exec": ("exec('x = 1')", "exec"),
    "eval": ("x = eval('1')", "eval"),
    "compile": ("c = compile('x', 'f', 'exec')", "compile"),
    "eval through a builtin's module": ("x = len.__self__.eval('1')", "__self__"),
    "types.FunctionType": ("import types\nf = types.FunctionType(c, {})", "function"),
    "from types import CodeType": ("from types import CodeType", "code object"),
    "ModuleType": ("import types\nm = types.ModuleType('autograder')", "module object"),
    "sys._getframe": ("import sys\nf = sys._getframe(1)", "call stack"),
    "inspect": ("import inspect", "frames"),
    "f_back": ("def f(frame):\n    return frame.f_back", "call stack"),
    "f_globals": ("def f(frame):\n    return frame.f_globals", "globals"),
    "tb_frame": ("try:\n    1 / 0\nexcept Exception as e:\n    f = e.__traceback__.tb_frame", "frame"),
    "gi_frame": ("f = gen.gi_frame", "frame"),
    "traceback.walk_stack": ("import traceback\nfs = list(traceback.walk_stack(None))", "call stack"),
    "gc": ("import gc", "garbage collector"),
    "gc.get_objects through an alias": ("def f(g):\n    return g.get_objects()", "garbage collector"),
    "ctypes": ("import ctypes", "ctypes"),
    "cffi": ("import cffi", "cffi"),
    "sys.settrace": ("import sys\nsys.settrace(f)", "trace function"),
    "sys.setprofile": ("import sys\nsys.setprofile(f)", "profile function"),
    "threading.settrace": ("import threading\nthreading.settrace(f)", "trace function"),
    "builtins written": ("import builtins\nbuiltins.len = f", "builtins"),
    "__builtins__ written": ("__builtins__['len'] = f", "__builtins__"),
    "__subclasses__": ("cs = object.__subclasses__()", "subclass"),
    "__code__": ("f.__code__ = g.__code__", "code"),
    "__globals__": ("g = f.__globals__", "globals"),
    "__closure__": ("c = f.__closure__", "captured"),
    "cell_contents": ("c = cell.cell_contents", "captured"),
    "__kwdefaults__ (the launch hook's original)": ("d = JIT.run.__kwdefaults__", "default"),
    "__wrapped__ (a patched API's original)": ("f = F.scaled_dot_product_attention.__wrapped__", "unwraps"),
    "__func__": ("f = obj.method.__func__", "function behind"),
    "pickle": ("import pickle", "unpickles"),
    "marshal": ("import marshal", "code objects"),
    "copyreg": ("import copyreg", "pickling"),
    "dill": ("import dill", "unpickles"),
    "torch.load that unpickles": ("import torch\nx = torch.load(p, weights_only=False)", "unpickles"),
    "torch._C": ("import torch\ntorch._C._set_x(1)", "C internals"),
    "from torch import _C": ("from torch import _C", "C internals"),
    "torch.autograd private toggle": ("import torch\ntorch.autograd._disable_profiler()", "profiler"),
    "private toggle through an alias": ("import torch.autograd as ag\nx = ag._profiler_enabled()", "profiler"),
    "private toggle through an assigned alias": ("import torch\na = torch.autograd\na._disable_profiler()", "profiler"),
    "torch reached through another module": ("import torch.nn.functional as F\nF.torch._C._x()", "C internals"),
    "torch.profiler": ("import torch\nwith torch.profiler.profile():\n    pass", "profiler"),
    "torch.autograd.profiler": ("import torch\np = torch.autograd.profiler.profile", "profiler"),
    "dispatch modes": ("from torch.utils._python_dispatch import TorchDispatchMode", "dispatcher"),
    "torch.overrides": ("import torch.overrides", "override"),
    "torch.library replaces kernels": ("import torch\nlib = torch.library.Library('aten', 'IMPL')", "kernels"),
    "cpp_extension": ("from torch.utils.cpp_extension import load_inline", "native code"),
    "a module passed around as a value": ("import torch\nf(torch.autograd)", "module torch.autograd"),
    "a from-imported module as a value": ("from torch import autograd\nf(autograd)", "module torch.autograd"),
    "match pattern attribute": ("import torch\nmatch torch:\n    case object(_C=c):\n        pass", "_C"),
    "monkeypatching torch": ("import torch\ntorch.autograd.grad_mode.x = 1", "rebinds"),
    "monkeypatching with setattr": ("import torch.nn.functional as F\nsetattr(F, 'softmax', f)", "rebinds"),
    "monkeypatching the standard library": ("import math\nmath.fsum = sum", "rebinds"),
    "Triton's launcher": ("from triton.runtime.jit import JITFunction", "Triton"),
    "Triton's launcher rebound": ("import triton\ntriton.runtime.jit.JITFunction.run = f", "Triton"),
    "CUDA-graph capture noticed": ("import torch\nc = torch.cuda.is_current_stream_capturing()", "capture"),
    "a thread outside the accounting": ("import threading\nthreading.Thread(target=f).start()", "thread"),
    "a process outside the accounting": ("import multiprocessing", "process"),
    "os.fork": ("import os\npid = os.fork()", "forks"),
    "the judge's pid": ("from os import getppid\npid = getppid()", "judge"),
    "/proc": ("f = open('/proc/self/mem', 'r+b')", "/proc"),
    "string annotations evaluated": ("import typing\nh = typing.get_type_hints(f)", "strings as code"),
    "a field named like a private toggle": ("class K:\n    _disable_profiler: int = 0", "declares"),
    "breakpoint": ("breakpoint()", "debugger"),
    "a private name folded from pieces": ("n = '_dis' + 'able_profiler'", "_disable_profiler"),
    "a grader module's name as a string": ("n = 'autograder.worker.' + 'forbid'", "grader"),
    "an f-string of pieces": ("n = f\"{'_'}C\"", "_C"),
    "/proc built in pieces": ("import os\np = os.path.join('/', 'proc', 'self', 'mem')", "/proc"),
    "an annotation string that runs code": ("def f(x: \"__import__('sys').modules\"):\n    pass", "annotation"),
    "views past a buffer (numpy)": ("import numpy as np\nv = np.lib.stride_tricks.as_strided(a, (9,), (8,))", "buffer"),
    "a raw address (numpy)": ("p = a.__array_interface__['data'][0]", "raw memory"),
}


@pytest.mark.parametrize("name", FLAGGED)
def test_each_reach_and_each_evasion_is_flagged_on_its_line(name):
    source, word = FLAGGED[name]
    found = scan_source("pkg/m.py", source, frozenset({"pkg"}))
    last = len(source.splitlines())
    assert any(word in f.what and f.line <= last for f in found), f"{name}: {word!r} not in {found}"


ACCEPTED = {
    "a dataclass check over its own fields": (
        "from dataclasses import dataclass, fields\n@dataclass\nclass C:\n    a: int\n"
        "    def __post_init__(self):\n        for f in fields(self):\n            getattr(self, f.name)"),
    "a loop over literal names": "def f(cfg):\n    for name in ('tp', 'cp'):\n        getattr(cfg, name)",
    "a dict literal's keys": "def f(cfg, tp):\n    d = {'tp': tp}\n    for k, v in d.items():\n        getattr(cfg, k)",
    "a module-level tuple of names": "ORDER = ('a', 'b')\ndef f(c):\n    return [getattr(c, n) for n in ORDER]",
    "a method's own computed attribute": "class A:\n    def f(self, order):\n        return [getattr(self, n) for n in order]",
    "frozen dataclass init": "class A:\n    def __post_init__(self):\n        object.__setattr__(self, 'x', 1)",
    "replacing a layer of a model": "def f(model, parent, attr, layer):\n    setattr(model.get_submodule(parent), attr, layer)",
    "torch's public API": ("import torch\nimport torch.nn.functional as F\nfrom torch import nn\nclass M(nn.Module):\n"
                           "    pass\nx = F.softmax(torch.ones(2, dtype=torch.float16), -1)\ny = torch.compile(f)\n"
                           "z = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu\nm = M().eval()"),
    "harmless sys and os": "import os, sys\nv = sys.version_info\nsys.stderr.write('x')\ne = os.environ.get('X')",
    "re.compile and hasattr": "import re\np = re.compile('a')\nh = hasattr(x, name)",
    "the package's own modules": "import pkg.config as c\nc.X = 1\nf(c)\nfrom . import util\nutil.Y = 2",
    "functions passed as values": "import torch\nys = list(map(torch.relu, xs))\nd = torch.float32",
    "a syntax error (it cannot be imported either)": "def f(:\n",
}


@pytest.mark.parametrize("name", ACCEPTED)
def test_ordinary_code_is_not_flagged(name):
    assert scan_source("pkg/m.py", ACCEPTED[name], frozenset({"pkg"})) == []


def test_a_file_made_to_defeat_the_parser_is_flagged_for_review():
    found = scan_source("pkg/m.py", "x = " + "-" * 5000 + "1\n")
    assert [f.what for f in found] == ["could not be scanned (RecursionError): review it by hand"]


def test_the_attack_submissions_are_each_flagged():
    """Every tests/fixtures/tampering/scan_* submission earns a finding (graded: tests/test_held.py)."""
    cases = sorted(TAMPERING.glob("scan_*"))
    assert len(cases) >= 8
    for case in cases:
        files = {p.relative_to(case): p.read_bytes() for p in case.rglob("*.py")}
        assert scan_package(files, {}), f"{case.name}: no finding"


def test_a_file_identical_to_the_given_one_is_skipped_and_the_package_may_patch_itself():
    files = {Path("demo/a.py"): b"import gc\n", Path("demo/b.py"): b"import demo.c as c\nc.X = 1\n"}
    assert scan_package(files, {Path("demo/a.py"): b"import gc\n"}) == []


def _course_sources() -> dict[str, bytes]:
    """Every package file the course wrote: references, given packages, stubs, notebook answers,
    wrong-approach cases (files and find/replace variants), and each broken variant of mutants.toml."""
    from autograder.host.repo import Course

    course = Course(REPO)
    out: dict[str, bytes] = {}
    for spec_file in sorted((REPO / "solutions").glob("*/assignment.toml")):
        aid = spec_file.parent.name
        spec = course.spec(aid)
        for root in (REPO / "solutions" / aid, REPO / "assignments" / aid):
            for package in spec.packages:
                out |= {str(p.relative_to(REPO)): p.read_bytes() for p in (root / package).rglob("*.py")}
        out |= {f"given to {aid}: {rel}": data for rel, data in given_packages(course, spec).items()
                if rel.suffix == ".py"}
        for m in load_mutants(spec_file.parent):
            text = (spec_file.parent / m.file).read_text().replace(m.find, m.replace, 1)
            out[f"mutant {aid}:{m.name}"] = text.encode()
    from autograder.notebooks.exercise import load_exercise, notebook_ids
    from autograder.notebooks.extract import extract

    for nid in notebook_ids(course):  # a notebook's reference answers, as the package they are graded in
        out[f"notebook {nid}"] = extract(load_exercise(course, nid).source_cells(), None).module.encode()
    for case in sorted(p for p in WRONG_APPROACH.iterdir() if p.is_dir()):
        out |= {str(p.relative_to(REPO)): p.read_bytes() for p in case.rglob("*.py")}
        replacements = case / "replace.toml"
        for entry in tomllib.loads(replacements.read_text())["replace"] if replacements.is_file() else []:
            aid = next(p.parent.name for p in (REPO / "solutions").glob(f"{case.name.split('_')[0]}_*/assignment.toml"))
            text = "".join(line for line in (REPO / "solutions" / aid / entry["file"]).read_text().splitlines(True)
                           if line.strip() not in ("# BEGIN SOLUTION", "# END SOLUTION"))  # as test_wrong_approach
            out[f"{case.name}: {entry['file']}"] = text.replace(entry["find"], entry["replace"]).encode()
    return out


def test_nothing_the_course_wrote_is_flagged():
    """No false positive on the references, the given packages, the stubs, the notebooks, the
    wrong-approach submissions (legitimate code that skips the exercise) or the broken variants.
    (course/figures is tooling that reloads reference packages through sys.modules and importlib:
    never a submission, and rightly flagged if it were one.)"""
    sources = _course_sources()
    assert len(sources) > 500
    found = [f for name, data in sources.items() for f in scan_source(name, data)]
    assert found == [], "\n".join(str(f) for f in found)


def _result(status: str, points: float = 2.0) -> TestResult:
    test = ExpectedTest(f"tests/test_a.py::t_{status}", "tests/test_a.py", points, False, False)
    return TestResult(test, status, score=points if status == PASSED else 0.0)


def test_a_finding_holds_every_passed_test_and_nothing_else():
    tests = [_result(s) for s in (PASSED, FAILED, NOT_GRADED, MANUAL)]
    found = scan_source("demo/ops.py", "import gc\n")
    note = hold_flagged(tests, found)
    assert [t.status for t in tests] == [HELD, FAILED, NOT_GRADED, MANUAL]
    assert tests[0].score == 0 and not tests[0].graded and tests[0].max_score == 0
    assert "demo/ops.py:1: walks the garbage collector (gc)" in tests[0].reason
    assert note.startswith("held for an instructor's review (1 passed tests, 2 points, no points counted)")
    assert hold_flagged([_result(PASSED)], []) == ""
