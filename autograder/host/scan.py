"""The tamper scan: code that reaches into the grader or torch's internals puts its points on hold.

The worker runs the student's package beside the op accounting, the forbidden-API patches and the
course timer, so what those report is the worker's word. The judge bounds what a lie buys (values
re-checked, times bracketed by its own clock, a ledger that must be complete); this scan closes the
easy ways to tell one. Reflective reach into the grader or into torch's private profiler and
dispatcher state (the constructs of `autograder.host.scan_rules`, found by `scan_ast`) is never
needed by the course's packages: no reference, given package or stub uses any of them.

What a finding holds: every auto-graded test of the grading that passed becomes HELD, with the
findings as its reason (its points in no automatic total until an instructor reviews it). Not only
the tests whose code path reaches the finding: a module-level patch, an import-time hook or a
rebinding done in one call changes every later call, and which tests a reach affected is exactly
what the worker could lie about. Failed tests stay failed (nothing is held that was not earned),
written answers stay pending, tests for other hardware stay not graded. The reference is never
scanned against itself (`grade --solution`), and a file identical to the course's own is skipped.

Besides, in a kernel exercise a package that imports an array library that computes outside torch
(`ARRAY_LIBRARIES`) is not graded at all (`array_library_imports`).

Limits: a static scan is a tripwire, not the evidence a grade rests on (that is the judge's). It
cannot follow values: a module object reached through an alias it cannot resolve (a relative
import of the package's own re-export, a module another module holds under a new name) and handed
to a method as `self` would pass `getattr(self, name)`; a /proc path built without literals passes
the text checks, and so does code that only computes in a way the exercise forbids (a result
cache, a decoy kernel). Those are for the judge's evidence (re-checked values, rotated inputs,
accounting it can see from outside) to catch, or to hold.
"""

from __future__ import annotations

import ast
import io
import threading
import tokenize
from dataclasses import dataclass
from pathlib import Path

from autograder.host.results import HELD, PASSED, TestResult
from autograder.host.scan_ast import scan_tree
from autograder.host.scan_rules import PLAIN_ENCODINGS

# CPython 3.11 keeps the AST constructor's recursion counter in interpreter-wide state: two threads
# parsing at once (a class graded with -j 2) can raise "SystemError: AST constructor recursion depth
# mismatch" (python/cpython#106905), so parses take turns.
_PARSE_LOCK = threading.Lock()
ARRAY_LIBRARIES = ("numpy", "cupy", "jax", "scipy", "numba", "tensorflow", "mlx", "pandas")
MAX_LISTED = 10  # findings named in a held test's reason (the note lists up to 40)


@dataclass(frozen=True)
class Finding:
    """One flagged construct: where it is and what it does."""

    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def _parse(data: bytes) -> ast.Module | str:
    """The module, or why it cannot be read ("" for a syntax error: such a file cannot be imported
    either, as Python's import parses it the same way)."""
    try:
        with _PARSE_LOCK:
            return ast.parse(data)
    except SyntaxError:
        return ""
    except (ValueError, RecursionError, MemoryError, SystemError) as exc:  # a file made to defeat the parser
        return type(exc).__name__


def scan_source(name: str, source: str | bytes, own: frozenset[str] = frozenset()) -> list[Finding]:
    """The findings of one file in line order. `own`: the submission's package names."""
    data = source.encode() if isinstance(source, str) else source
    found: list[Finding] = []
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    if encoding.lower() not in PLAIN_ENCODINGS:
        found.append(Finding(name, 1, f"declares the source encoding {encoding} (hides code from a reader)"))
    tree = _parse(data)
    if isinstance(tree, str):
        if tree:
            found.append(Finding(name, 1, f"could not be scanned ({tree}): review it by hand"))
        return found
    for line, what in sorted(dict.fromkeys(scan_tree(tree, own)), key=lambda f: f[0]):  # stable: check order
        found.append(Finding(name, line, what))
    return found


def scan_package(files: dict[Path, bytes], given: dict[Path, bytes]) -> list[Finding]:
    """Findings over the submission's package files (relative path -> bytes), leaving out files
    identical to those the course gave (`given`: the generated stub and given code)."""
    own = frozenset(rel.parts[0] for rel in files)
    found = []
    for rel, data in sorted(files.items()):
        if rel.suffix == ".py" and data != given.get(rel):
            found += scan_source(rel.as_posix(), data, own)
    return found


def hold_flagged(tests: list[TestResult], findings: list[Finding]) -> str:
    """Put every passed test on hold with the findings as its reason; the note for the report
    ("" when nothing was found)."""
    if not findings:
        return ""
    listed = "; ".join(str(f) for f in findings[:MAX_LISTED]) + ("; ..." if len(findings) > MAX_LISTED else "")
    reason = f"held for an instructor's review: the package reaches into the grader or torch's internals: {listed}"
    held = [t for t in tests if t.status == PASSED]
    for t in held:  # perf notes stay: what the reviewer would be granting
        t.status, t.reason, t.held_score, t.score = HELD, reason, t.score, 0.0
    points = sum(t.test.points for t in held)
    return (f"held for an instructor's review ({len(held)} passed tests, {points:g} points, no points counted): "
            "the package reaches into the grader or torch's internals:\n  "
            + "\n  ".join(str(f) for f in findings[:40]))


def array_library_imports(files: dict[Path, bytes], given: dict[Path, bytes]) -> list[str]:
    """'file:line: imports numpy (numpy)' for each array library the submission's package imports
    (import statements, and `__import__` / `import_module` with a literal name)."""
    found = []
    for rel, data in sorted(files.items()):
        if rel.suffix != ".py" or data == given.get(rel) or isinstance(tree := _parse(data), str):
            continue
        for node in ast.walk(tree):
            for module in _imported(node):
                top = module.split(".")[0]
                if top in ARRAY_LIBRARIES:
                    found.append(f"{rel.as_posix()}:{node.lineno}: imports {top} ({module})")
                    break
    return found


def _imported(node: ast.AST) -> list[str]:
    """The modules an import statement, `__import__("m")` or `import_module("m")` names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if called in ("__import__", "import_module"):
            return [node.args[0].value]
    return []
