"""What the tamper scan reads off single syntax nodes (the text literal pieces fold to, the
annotations and names a node declares) and off the installed packages (whether a dotted name is a
submodule file), for host/scan_ast.py's scanner."""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path


@functools.cache
def _package_dirs(top: str) -> tuple[Path, ...]:
    """The folders of an installed top-level package (found without importing it; () if none)."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return ()
    return tuple(Path(p) for p in (spec.submodule_search_locations or ())) if spec else ()


@functools.cache
def is_module(dotted: str) -> bool:
    """Whether `a.b.c` names a submodule file of an installed package (torch.autograd: yes,
    torch.autograd.grad: no), read from the file system."""
    parts = dotted.split(".")
    for folder in _package_dirs(parts[0]) if len(parts) > 1 else ():
        path = folder.joinpath(*parts[1:])
        if path.is_dir() or path.with_suffix(".py").is_file() or any(path.parent.glob(f"{parts[-1]}.*.so")):
            return True
    return False


def folded(node: ast.AST) -> str | None:
    """The string an expression of literal pieces makes (+, f-strings, "sep".join of a literal list)."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = folded(node.left), folded(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        pieces = [folded(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
        return "".join(pieces) if all(p is not None for p in pieces) else None  # type: ignore[arg-type]
    return None


def annotations_of(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node.returns] if node.returns else []
    if isinstance(node, (ast.arg, ast.AnnAssign)):
        return [node.annotation] if node.annotation else []
    return []


def declared_names(node: ast.AST) -> list[str]:
    """Names a node declares that could be turned into strings (a field, a function's __name__, a
    keyword argument's key)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword) and node.arg:
        return [node.arg]
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return [node.id]
    return []
