"""Forbidden APIs: patched to raise while a test runs, including aliases the student imported.

`torch.nn.functional.scaled_dot_product_attention` is replaced on its module and wherever a module
of the student's package holds the same object (`from torch.nn.functional import ...`). A dotted
name that is a module has each public callable it defines patched (not the names it imported); a module that is not installed is made
unimportable for the test's duration.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Patch = tuple[object, str, object]
_MISSING = object()
# The patches of the test now running: (owner object, attribute, original value); lifted by oracle().
_patched: list[Patch] = []


def forbidden_stub(name: str) -> Callable[..., object]:
    def _raise(*args: object, **kwargs: object) -> object:
        raise RuntimeError(f"{name} is forbidden in this assignment: implement it yourself")

    _raise.__name__ = name.rsplit(".", 1)[-1]
    return _raise


@contextmanager
def lifted() -> Iterator[None]:
    """The original forbidden APIs within the block (the test's oracle), the stubs again after.
    With the submission's code on the stack (autograder/worker/trust.py) it lifts nothing."""
    from autograder.worker import trust

    if trust.pinned() and trust.foreign_caller(""):
        yield
        return
    saved = [(owner, attr, getattr(owner, attr, None)) for owner, attr, _ in _patched]
    for owner, attr, original in _patched:
        setattr(owner, attr, original)
    try:
        yield
    finally:
        for owner, attr, current in saved:
            setattr(owner, attr, current)


def _resolve(name: str) -> tuple[object, str, object] | None:
    """(owner, attribute, value) for a dotted name, importing the longest module prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        owner, attr = None, ""
        for part in parts[cut:]:
            owner, attr = obj, part
            obj = getattr(obj, part, _MISSING)
            if obj is _MISSING:
                return None
        if owner is None:  # the whole name is a module
            parent = sys.modules.get(".".join(parts[:-1])) if len(parts) > 1 else None
            return (parent, parts[-1], obj)
        return (owner, attr, obj)
    return None


def _aliases(original: object, package: str) -> list[Patch]:
    found = []
    for mod_name, module in list(sys.modules.items()):
        if module is None or not (mod_name == package or mod_name.startswith(package + ".")):
            continue
        for attr, value in list(vars(module).items()):
            if value is original:
                found.append((module, attr, original))
    return found


def apply(names: list[str], package: str) -> list[Patch]:
    """Patch every forbidden name; returns what `restore` needs to undo it."""
    patches: list[Patch] = []
    for name in names:
        resolved = _resolve(name)
        if resolved is None:
            patches.append((sys.modules, name, sys.modules.get(name, _MISSING)))
            sys.modules[name] = None  # type: ignore[assignment]  # import now raises ImportError
            continue
        owner, attr, value = resolved
        targets: list[Patch] = []
        if isinstance(value, types.ModuleType):
            for sub, fn in vars(value).items():
                # the module's own callables only: a name it imported (pathlib.Path, json.dumps) is not
                # what is forbidden, and patching it would reach the student's own imports of it
                own = getattr(fn, "__module__", None) == value.__name__
                if callable(fn) and own and not sub.startswith("_") and not isinstance(fn, types.ModuleType):
                    targets.append((value, sub, fn))
        else:
            targets.append((owner, attr, value))
        for t_owner, t_attr, original in targets:
            stub = forbidden_stub(f"{name}" if t_owner is owner else f"{name}.{t_attr}")
            for p_owner, p_attr, p_orig in [(t_owner, t_attr, original), *_aliases(original, package)]:
                setattr(p_owner, p_attr, stub)
                patches.append((p_owner, p_attr, p_orig))
    _patched[:] = [p for p in patches if p[0] is not sys.modules]
    return patches


def restore(patches: list[Patch]) -> None:
    for owner, attr, original in reversed(patches):
        if owner is sys.modules:
            if original is _MISSING:
                sys.modules.pop(attr, None)
            else:
                sys.modules[attr] = original  # type: ignore[assignment]
        else:
            setattr(owner, attr, original)
    _patched.clear()
