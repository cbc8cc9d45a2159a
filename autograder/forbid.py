"""Forbidden APIs: patched to raise while a test runs, including aliases the student imported.

`torch.nn.functional.scaled_dot_product_attention` is replaced on its module and wherever a module
of the student's package holds the same object (`from torch.nn.functional import ...`). A dotted
name that is a module has each public callable patched; a module that is not installed is made
unimportable for the test's duration.
"""

from __future__ import annotations

import importlib
import sys
import types

from autograder.testing import forbidden_stub, register_patches

Patch = tuple[object, str, object]
_MISSING = object()


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
                if callable(fn) and not sub.startswith("_") and not isinstance(fn, types.ModuleType):
                    targets.append((value, sub, fn))
        else:
            targets.append((owner, attr, value))
        for t_owner, t_attr, original in targets:
            stub = forbidden_stub(f"{name}" if t_owner is owner else f"{name}.{t_attr}")
            for p_owner, p_attr, p_orig in [(t_owner, t_attr, original), *_aliases(original, package)]:
                setattr(p_owner, p_attr, stub)
                patches.append((p_owner, p_attr, p_orig))
    register_patches([p for p in patches if p[0] is not sys.modules])
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
    register_patches([])
