"""The tamper scan of one parsed file: (line, what) for each construct `scan_rules` flags.

A static scan cannot know what an expression holds, so it flags the ways of reaching an object by
reflection rather than the objects: imports and dotted uses of flagged modules (through any
`import ... as` alias or plain `x = module.attr` assignment), flagged attribute names on any object,
builtins that run or resolve strings, attribute accessors with a computed name (or passed around as
values), a module bound by `import` passed around as a value (where `getattr(m, n)` on an unknown
`m` would hide it), attribute lookups of `match` class patterns, writes to library attributes
(monkeypatching torch, Triton or the standard library), unpickling loaders, and text naming /proc.
A computed attribute name is accepted only where it cannot hide a reach (`scan_names`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from autograder.host.scan_names import computed_name_ok
from autograder.host.scan_nodes import annotations_of, declared_names, folded, is_module
from autograder.host.scan_rules import (
    ACCESSED_NAMES,
    ACCESSORS,
    DUNDER_ACCESSORS,
    EXACT_TEXT,
    FLAGGED_NAMES,
    FLAGGED_TEXT,
    NAME_RESOLVERS,
    UNSAFE_KEYWORDS,
    attribute_finding,
    module_finding,
)

# Packages that other modules re-export as an attribute (`torch.nn.functional.torch`): a chain
# through one is read from there (`F.torch.autograd` is torch.autograd).
REEXPORTED = frozenset({"torch", "triton"})


def scan_tree(tree: ast.Module, own: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, what) for every flagged construct of one module; `own`: the top-level names of the
    submission's packages (writes to their attributes are the package's own business)."""
    return _Scanner(tree, own).run()


class _Scanner:
    def __init__(self, tree: ast.Module, own: frozenset[str]) -> None:
        self.tree = tree
        self.own_roots = own
        self.parent: dict[ast.AST, ast.AST] = {}
        self.aliases: dict[str, str] = {}      # local name -> dotted name it stands for
        self.modules: set[str] = set()         # names bound by `import x` (certainly a module object)
        self.literals: dict[str, list[ast.expr]] = {}  # name -> every value assigned to it
        self.found: list[tuple[int, str]] = []

    def run(self) -> list[tuple[int, str]]:
        nodes, stack = [], [self.tree]
        while stack:  # one pass over the tree (ast.walk would list each node's children a second time)
            node = stack.pop()
            nodes.append(node)
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
                stack.append(child)
        by_type: dict[type, list[ast.AST]] = {}
        for node in nodes:
            by_type.setdefault(type(node), []).append(node)
        for node in by_type.get(ast.Import, []) + by_type.get(ast.ImportFrom, []):  # before any alias
            self._bind_import(node)
        for node in by_type.get(ast.Assign, []):
            self._bind_assignment(node)
        for kind, check in self._checks().items():
            for node in by_type.get(kind, []):
                check(node)
        return self.found

    def _checks(self) -> dict[type, Callable[[Any], None]]:
        return {ast.Import: self._check_import, ast.ImportFrom: self._check_import, ast.Name: self._check_name,
                ast.Attribute: self._check_attribute, ast.Call: self._check_call, ast.MatchClass: self._check_match,
                ast.Constant: self._check_text, ast.BinOp: self._check_folded, ast.JoinedStr: self._check_folded,
                ast.FunctionDef: self._check_function, ast.AsyncFunctionDef: self._check_function,
                ast.ClassDef: self._check_declared, ast.arg: self._check_function, ast.keyword: self._check_declared,
                ast.AnnAssign: self._check_annotation}

    def _check_function(self, node: ast.AST) -> None:
        self._check_declared(node)
        self._check_annotation(node)

    def _flag(self, node: ast.AST, what: str) -> None:
        self.found.append((getattr(node, "lineno", 1), what))

    # ---- what names stand for ---------------------------------------------------------------
    def _bind_import(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                self.aliases[local] = a.name if a.asname else a.name.split(".")[0]
                self.modules.add(local)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def _bind_assignment(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.literals.setdefault(target.id, []).append(node.value)
                    if (dotted := self.dotted(node.value)) is not None:
                        self.aliases.setdefault(target.id, dotted)

    def dotted(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for (`F.softmax` -> torch.nn.functional.softmax)."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        chain = [*self.aliases[node.id].split("."), *reversed(parts)]
        restart = max((i for i, part in enumerate(chain) if part in REEXPORTED), default=0)
        return ".".join(chain[restart:])

    # ---- the checks -------------------------------------------------------------------------
    def _check_match(self, node: ast.MatchClass) -> None:
        for name in node.kwd_attrs:  # `case object(_C=c)` looks the attribute up
            if why := attribute_finding(name):
                self._flag(node, f"{why} (pattern attribute {name})")

    def _check_text(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and not isinstance(self.parent.get(node), (ast.BinOp, ast.JoinedStr)):
            self._check_string(node, node.value)

    def _check_string(self, node: ast.AST, text: str) -> None:
        """A string (or one folded from literal pieces) that names what the scan watches: a private
        attribute, a flagged module path, a /proc path."""
        for part, why in FLAGGED_TEXT.items():
            if part in text:
                self._flag(node, why)
        if text in EXACT_TEXT:
            self._flag(node, EXACT_TEXT[text])
        named = attribute_finding(text) if text.startswith("_") or text in ACCESSED_NAMES else ""
        dotted = module_finding(text) if "." in text and text.replace(".", "").replace("_", "").isalnum() else ""
        if why := named or dotted:
            self._flag(node, f"{why} (the string {text!r})")

    def _check_folded(self, node: ast.AST) -> None:
        """`"_dis" + "able_profiler"`, f"{'_'}C", "".join(["_", "C"]): strings built from literals."""
        if isinstance(self.parent.get(node), (ast.BinOp, ast.JoinedStr)):
            return  # the outermost piece folds the whole
        if (text := folded(node)) is not None:
            self._check_string(node, text)

    def _check_annotation(self, node: ast.AST) -> None:
        """A string annotation is code that typing.get_type_hints or singledispatch evaluates."""
        for annotation in annotations_of(node):
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                try:
                    tree = ast.parse(annotation.value, mode="eval")
                except SyntaxError:
                    continue
                if any(isinstance(n, ast.Call) for n in ast.walk(tree)):
                    self._flag(node, f"an annotation string that calls code ({annotation.value[:40]!r})")

    def _check_declared(self, node: ast.AST) -> None:
        """A name that can become a string (a field, a function's __name__, a keyword's key)."""
        for declared in declared_names(node):
            if why := attribute_finding(declared):
                self._flag(node, f"declares the name {declared} ({why})")

    def _check_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.ImportFrom) and (node.level or not node.module):
            return  # the package's own modules
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            why = module_finding(name) or (attribute_finding(name.rsplit(".", 1)[-1]) if "." in name else "")
            if why:
                self._flag(node, f"{why} ({name})")
                return

    def _check_name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self._check_declared(node)
        parent = self.parent.get(node)
        called = isinstance(parent, ast.Call) and parent.func is node
        if node.id in FLAGGED_NAMES:
            self._flag(node, FLAGGED_NAMES[node.id])
        elif node.id in ACCESSORS | NAME_RESOLVERS and not called:
            self._flag(node, f"passes {node.id} around as a value (a computed attribute lookup)")
        elif isinstance(node.ctx, ast.Load) and not (isinstance(parent, ast.Attribute) and parent.value is node):
            dotted = self.aliases.get(node.id)
            if dotted and (why := module_finding(dotted)):
                self._flag(node, f"{why} ({dotted})")
            elif (node.id in self.modules or (dotted and not called and is_module(dotted))) \
                    and self._is_library(dotted or node.id) and not self._accessed(node):
                self._flag(node, f"passes the module {dotted or node.id} around as a value")

    def _check_attribute(self, node: ast.Attribute) -> None:
        outermost = not isinstance(self.parent.get(node), ast.Attribute)  # the whole chain decides, once
        if why := attribute_finding(node.attr):
            self._flag(node, f"{why} (.{node.attr})")
        elif node.attr in DUNDER_ACCESSORS and not self._accessor_call_ok(node):
            self._flag(node, f"looks an attribute up by a computed name (.{node.attr})")
        dotted = self.dotted(node)
        if dotted is not None:
            if outermost and (why := self._dotted_finding(dotted)):
                self._flag(node, f"{why} ({dotted})")
            elif outermost and isinstance(node.ctx, ast.Load) and not self._called(node) and is_module(dotted):
                self._flag(node, f"passes the module {dotted} around as a value")
            if isinstance(node.ctx, (ast.Store, ast.Del)) and self._is_library(dotted):
                self._flag(node, f"rebinds a library's attribute ({dotted})")

    def _accessed(self, node: ast.AST) -> bool:
        """`node` is the object of `getattr(node, "literal")` (checked as `node.literal` is)."""
        call = self.parent.get(node)
        return isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in ACCESSORS | {"hasattr"} \
            and len(call.args) > 1 and call.args[0] is node and isinstance(call.args[1], ast.Constant)

    def _called(self, node: ast.AST) -> bool:
        call = self.parent.get(node)
        return isinstance(call, ast.Call) and call.func is node

    def _dotted_finding(self, dotted: str) -> str:
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):  # the longest flagged prefix names it best
            if why := module_finding(".".join(parts[:cut])):
                return why
        return ""

    def _is_library(self, dotted: str) -> bool:
        """Whether `dotted` lies in a module the file imported (absolute imports only: the package's
        own modules are imported relatively or by the package's name, which the caller exempts)."""
        return dotted.split(".")[0] not in self.own_roots

    def _accessor_call_ok(self, node: ast.Attribute) -> bool:
        """`object.__setattr__(self, "x", v)`: called, with a literal name that is not flagged."""
        call = self.parent.get(node)
        if not (isinstance(call, ast.Call) and call.func is node):
            return False
        names = [a.value for a in call.args[:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        return bool(names) and not attribute_finding(names[0])

    def _check_call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in ACCESSORS and isinstance(func, ast.Name):
            self._check_accessor(node, name)
        elif name in NAME_RESOLVERS:
            texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if len(texts) != len(node.args) or not texts or any(
                    attribute_finding(part) for text in texts for part in text.split(".")):
                self._flag(node, f"looks attributes up by name ({name})")
        for kw in node.keywords:
            if kw.arg in UNSAFE_KEYWORDS and not (isinstance(kw.value, ast.Constant)
                                                  and kw.value.value is UNSAFE_KEYWORDS[kw.arg]):
                self._flag(node, f"unpickles what it loads ({kw.arg}=...)")

    def _check_accessor(self, node: ast.Call, name: str) -> None:
        if len(node.args) < 2:
            self._flag(node, f"calls {name} without a literal name")
            return
        target, attr = node.args[0], node.args[1]
        if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
            why = attribute_finding(attr.value)
            dotted = self.dotted(target)
            full = f"{dotted}.{attr.value}" if dotted else None
            why = why or (self._dotted_finding(full) if full else "")
            if why:
                self._flag(node, f"{why} ({name} {attr.value!r})")
            elif name != "getattr" and full and self._is_library(full):
                self._flag(node, f"rebinds a library's attribute ({full})")
            return
        if not computed_name_ok(target, attr, self.parent, self.literals):
            self._flag(node, f"looks an attribute up by a computed name ({name})")

    # ---- computed names that cannot hide a reach ---------------------------------------------
