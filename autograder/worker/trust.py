"""What the worker trusts, decided by identity, never by a name the submission can claim.

The student's package runs in this process and can compile code under any `__name__` or file name,
plant modules in `sys.modules` and rebind attributes. So a capability (`oracle()`, a pause of the
op accounting, the profiler's own switches) is granted by what the calling frames ARE:

- **trusted code**: the code objects the worker compiled itself from the master test files and the
  conftest (every function, class body, lambda and comprehension nested in their `co_consts`),
  registered before the module runs, and run in the namespace of a module the worker made for
  them (the test's code rebuilt around the package's globals is not the test's);
- **library namespaces**: the globals of every module loaded before the package (the grader's own
  modules, the standard library, torch): `pin()` snapshots them in `main()` before the conftest and
  the package import. A frame runs in one of them only if its function was defined there, or if
  code was executed into that namespace on purpose (`exec(code, vars(module))`,
  `types.FunctionType(code, vars(module))`): reflective access the host's scan flags.

A frame that is neither is foreign: the package's, whatever `__name__` it claims. A capability asked
for with a foreign frame anywhere on the stack is refused.

**Pinned modules**: the grader's worker-side modules (and the conftest once loaded) are recorded
with their `sys.modules` entry and their functions and classes (methods included). `restore()` puts
back whatever the package rebound and names it; the worker does that before it loads a master test
module (so `from autograder.testing import oracle` and `from conftest import ...` bind the real
ones) and at the end of every test (the names go to the ledger as tampering). The registry of test
modules is the worker's own (`test_module`), never looked up in `sys.modules`.

All of this is still the worker's word: code that reaches these tables by reflection can forge them.
What it buys is that no ordinary import, name or attribute rebinding can, and that the reflection
needed instead is what the static scan flags.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any

_FUNCTION_LIKE = (types.FunctionType, type, types.ModuleType, staticmethod, classmethod, property)

_codes: dict[int, types.CodeType] = {}             # id -> code object (kept alive: ids stay unique)
_library: dict[int, dict] = {}                      # id -> globals dict of a module loaded before the package
_own_globals: dict[int, dict] = {}                  # id -> globals dict of a test module the worker loaded
_test_modules: dict[tuple[str, str], types.ModuleType] = {}
_pinned: dict[str, tuple[types.ModuleType, dict[str, object]]] = {}
_state = {"pinned": False}
_MISSING = object()


def pinned() -> bool:
    """Whether `pin()` ran in this process (only the worker pins; the grader's own unit tests don't)."""
    return _state["pinned"]


def pin(package: str) -> None:
    """Snapshot the library namespaces and pin the grader's modules: call before the package imports."""
    for helper in ("autograder.testing", "autograder.timing"):  # what test code binds, before the package
        importlib.import_module(helper)

    try:
        import torch  # noqa: F401  the worker imports it at its first reply anyway: no extra cost
    except ImportError:
        pass
    for name, module in list(sys.modules.items()):
        if module is None or name == package or name.startswith(package + "."):
            continue
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict):
            _library[id(namespace)] = namespace
        if name.startswith("autograder.") or _is_worker_main(name, module):
            pin_module(name, module)
    _state["pinned"] = True


def _is_worker_main(name: str, module: Any) -> bool:
    spec = getattr(module, "__spec__", None)
    return name == "__main__" and getattr(spec, "name", "").startswith("autograder.")


def pin_module(name: str, module: types.ModuleType) -> None:
    _pinned[name] = (module, _bindings(module))


def _bindings(module: types.ModuleType) -> dict[str, object]:
    """The module's functions, classes and submodules, and the methods of the classes it defines."""
    found: dict[str, object] = {}
    for attr, value in list(vars(module).items()):
        if not isinstance(value, _FUNCTION_LIKE):
            continue
        found[attr] = value
        if isinstance(value, type) and value.__module__ == module.__name__:
            for key, member in list(vars(value).items()):
                if isinstance(member, _FUNCTION_LIKE):
                    found[f"{attr}.{key}"] = member
    return found


def restore() -> list[str]:
    """Put back every pinned module and binding the package replaced; what was replaced."""
    changed = []
    for name, (module, bindings) in _pinned.items():
        if sys.modules.get(name) is not module:
            changed.append(f"sys.modules[{name!r}]")
            sys.modules[name] = module
        for key, value in bindings.items():
            owner, _, attr = key.rpartition(".")
            target = vars(module).get(owner) if owner else module
            if target is None:
                continue
            current = vars(target).get(attr, _MISSING) if isinstance(target, type) else getattr(target, attr, _MISSING)
            if current is not value:
                changed.append(f"{name}.{key}")
                setattr(target, attr, value)
    return changed


# ---- trusted code ---------------------------------------------------------------------------------
def _register(code: types.CodeType) -> None:
    stack = [code]
    while stack:
        item = stack.pop()
        if id(item) not in _codes:
            _codes[id(item)] = item
            stack.extend(const for const in item.co_consts if isinstance(const, types.CodeType))


def load_trusted(module_name: str, path: str, source: str | bytes | None = None) -> types.ModuleType:
    """Compile a master test file or the conftest (`source`, the judge's copy, else read from
    `path`), register every code object in it, and run it as module `module_name` with the pinned
    grader modules in place."""
    if source is None:
        with open(path, "rb") as f:
            source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
    _register(code)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None:
        raise ImportError(f"cannot load the test module {path}")
    module = importlib.util.module_from_spec(spec)
    restore()  # `from autograder.testing import ...`, `from conftest import ...` bind the real ones
    sys.modules[module_name] = module  # dataclasses and `from x import` inside it look it up while it runs
    _own_globals[id(module.__dict__)] = module.__dict__
    exec(code, module.__dict__)  # noqa: S102  the master test's own code, compiled above
    return module


def test_module(module_name: str, path: str, load: Any) -> types.ModuleType:
    """The master test module `module_name` at `path`, loaded once by `load()` and kept here: what
    the package puts in `sys.modules` under that name is never used."""
    key = (module_name, os.path.abspath(path))
    if key not in _test_modules:
        _test_modules[key] = load()
    return _test_modules[key]


def trusted_function(module: types.ModuleType, qualname: str) -> Any:
    """The function `qualname` of a master test module, checked to be the one the test file defines
    (its code compiled by the worker, its globals the module's); a rebound one raises."""
    fn: Any = module
    for part in qualname.split("."):
        fn = vars(fn).get(part) if isinstance(fn, (types.ModuleType, type)) else getattr(fn, part)
    code = getattr(fn, "__code__", None)
    if _state["pinned"] and (id(code) not in _codes or _codes[id(code)] is not code
                             or fn.__globals__ is not module.__dict__):
        raise RuntimeError(f"{module.__name__}.{qualname} is not the master test's function: it was replaced "
                           "in the submission's process (tampering)")
    return fn


# ---- the stack --------------------------------------------------------------------------------------
def foreign_frame(frame: Any) -> str:
    """'file:line' of the first frame on the stack from `frame` outward that is neither trusted code
    run in the namespace of its own test module, nor in a library namespace ("" when there is none)."""
    while frame is not None:
        code, namespace = frame.f_code, id(frame.f_globals)
        own = _codes.get(id(code)) is code and namespace in _own_globals
        if not own and namespace not in _library:
            return f"{code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def foreign_caller(package: str) -> str:
    """Who asked, if the capability must be refused: the first foreign frame on the stack (in the
    worker), or the first frame in `package` by its module name (the grader's own unit tests, which
    run the accounting in-process without `pin()`); "" when the request may be granted."""
    frame = sys._getframe(1)
    if _state["pinned"]:
        return foreign_frame(frame)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == package or module.startswith(package + "."):
            return module
        frame = frame.f_back
    return ""
