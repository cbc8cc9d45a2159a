"""Computed attribute names the tamper scan accepts: those that cannot hide a reach.

`getattr(obj, name)` with a name that is not a literal is a finding, except where the name or the
object is known to be harmless: on `self` / `cls` as a method's first parameter (the package's own
object: a module could become `self` only by being passed around as a value, which the scan flags),
on a `torch.nn.Module.get_submodule(...)` result (a layer of the model, not a Python module), or
when the name is a loop variable over literal strings (`for name in ("tp", "cp")`, the keys of a
dict literal) and bound nowhere else in its scope.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
OWN_OBJECTS = frozenset({"self", "cls"})
BINDING_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.withitem, ast.ExceptHandler,
                      ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal)


Parents = dict[ast.AST, ast.AST]
Literals = dict[str, list[ast.expr]]  # name -> every value assigned to it in the file


def computed_name_ok(target: ast.expr, attr: ast.expr, parent: Parents, literals: Literals) -> bool:
    """Whether `getattr(target, attr)` with a computed `attr` cannot hide a reach."""
    if isinstance(target, ast.Name) and _own_object(target, parent):
        return True
    if isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute) \
            and target.func.attr == "get_submodule":
        return True
    return isinstance(attr, ast.Name) and _literal_loop_variable(attr, parent, literals)


def _own_object(name: ast.Name, parent: Parents) -> bool:
    """`self` / `cls` as the first parameter of a method, never rebound in it: the package's own
    object (a module could reach it only by being passed around as a value, which is flagged)."""
    scope = _scope(name, parent)
    if name.id not in OWN_OBJECTS or not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or not isinstance(parent.get(scope), ast.ClassDef):
        return False
    first = _arguments(scope.args)[:1]
    return bool(first) and first[0].arg == name.id and list(_bindings(scope, name.id)) == [scope.args]


def _literal_loop_variable(name: ast.Name, parent: Parents, literals: Literals) -> bool:
    """`name` is bound in its scope only by loops over literal strings (or a dict literal's keys)."""
    scope = _scope(name, parent)
    bindings = list(_bindings(scope, name.id))
    return bool(bindings) and all(_literal_strings(b, name.id, literals) for b in bindings)


def _scope(node: ast.AST, parent: Parents) -> ast.AST:
    while node in parent and not isinstance(node, SCOPES):
        node = parent[node]
    return node


def _literal_strings(loop: ast.AST, name: str, literals: Literals) -> bool:
    """`for name in <literal strings>`, or `for name, _ in <dict literal>.items()`."""
    if not isinstance(loop, (ast.For, ast.comprehension)):
        return False
    source, target = loop.iter, loop.target
    pair = isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[0], ast.Name) \
        and target.elts[0].id == name
    method = source.func.attr if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) \
        and not source.args else ""
    if pair and method == "items" or isinstance(target, ast.Name) and method == "keys":
        source = source.func.value
    elif not isinstance(target, ast.Name) or method:
        return False
    if isinstance(source, ast.Name):
        values = literals.get(source.id, [])
        return len(values) == 1 and _string_collection(values[0])
    return _string_collection(source)


def _string_collection(node: ast.AST) -> bool:
    """A literal tuple, list or set of strings, or a dict literal whose keys are all strings."""
    items = node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) \
        else None
    return items is not None and bool(items) and all(isinstance(i, ast.Constant) and isinstance(i.value, str)
                                                     for i in items)


def _bindings(scope: ast.AST, name: str) -> Iterator[ast.AST]:
    """Every statement of `scope` (not of scopes nested in it) that binds `name`: the loop for a loop
    variable, the parameters for a parameter, the statement itself otherwise."""
    is_function = isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    if is_function and any(a.arg == name for a in _arguments(scope.args)):
        yield scope.args
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            if getattr(node, "name", None) == name:
                yield node
            continue
        loop = isinstance(node, (ast.For, ast.comprehension)) and _binds(node.target, name)
        if loop or isinstance(node, BINDING_STATEMENTS) and _binds_statement(node, name):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _arguments(args: ast.arguments) -> list[ast.arg]:
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg, args.kwarg])]


def _binds(target: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))


def _binds_statement(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.Assign):
        return any(_binds(t, name) for t in node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
        return _binds(node.target, name)
    if isinstance(node, ast.withitem):
        return node.optional_vars is not None and _binds(node.optional_vars, name)
    if isinstance(node, ast.ExceptHandler):
        return node.name == name
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name for a in node.names)
    return name in node.names  # global / nonlocal
