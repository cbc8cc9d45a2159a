"""A static scan of the submission for code that reaches into the grader rather than doing the work.

The worker runs the student's package beside the op accounting and the course timer, which it can
therefore tamper with; the judge bounds what that buys (values re-checked, times bracketed by its
own clock, a ledger that must be complete), and this scan adds a human in the loop: references to
grader or test-framework internals, profiler switches, frame and garbage-collector walking and
`ctypes` are listed for an instructor's review in the report. Nothing here changes a score, except
in a kernel exercise: a package that imports an array library that computes outside torch
(`ARRAY_LIBRARIES`) is not graded (`array_library_imports`).
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

FLAGGED_MODULES = {
    "autograder": "imports the grader",
    "_pytest": "imports pytest's internals",
    "pytest": "imports the test framework",
    "pluggy": "imports pytest's plugin system",
    "ctypes": "uses ctypes (raw memory, foreign calls)",
    "gc": "walks the garbage collector",
    "torch.profiler": "uses the profiler the op accounting runs on",
    "torch.autograd.profiler": "uses the profiler the op accounting runs on",
}
# CPython 3.11 keeps the AST constructor's recursion counter in interpreter-wide state: two threads
# parsing at once (a class graded with -j 2) can raise "SystemError: AST constructor recursion depth
# mismatch" (python/cpython#106905), so parses take turns.
_PARSE_LOCK = threading.Lock()
ARRAY_LIBRARIES = ("numpy", "cupy", "jax", "scipy", "numba", "tensorflow", "mlx", "pandas")
FLAGGED_ATTRIBUTES = {
    "_getframe": "walks the call stack", "f_back": "walks the call stack", "f_globals": "reads a frame's globals",
    "f_locals": "reads a frame's locals", "settrace": "installs a trace function",
    "setprofile": "installs a profile function", "_disable_profiler": "switches the profiler off",
    "_profiler_enabled": "inspects the profiler", "get_referrers": "walks the garbage collector",
    "get_objects": "walks the garbage collector", "__code__": "rewrites or reads a function's code",
    "getppid": "looks for the judge process",
}


def _imported(node: ast.AST) -> list[str]:
    """The modules an import statement, `__import__("m")` or `import_module("m")` names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if called in ("__import__", "import_module"):
            return [node.args[0].value]
    return []


def scan_source(name: str, source: str, flagged_modules: dict[str, str] | None = None,
                attributes: bool = True) -> list[str]:
    """'file:line: what' for each flagged construct in one file (a file that does not parse: none)."""
    try:
        with _PARSE_LOCK:
            tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        for module in _imported(node):
            for flagged, why in (flagged_modules or FLAGGED_MODULES).items():
                if module == flagged or module.startswith(flagged + "."):
                    found.append(f"{name}:{node.lineno}: {why} ({module})")
                    break
        if attributes and isinstance(node, ast.Attribute) and node.attr in FLAGGED_ATTRIBUTES:
            found.append(f"{name}:{node.lineno}: {FLAGGED_ATTRIBUTES[node.attr]} (.{node.attr})")
    return sorted(set(found), key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


def array_library_imports(files: dict[Path, bytes], given: dict[Path, bytes]) -> list[str]:
    """'file:line: imports numpy (numpy)' for each array library the submission's package imports."""
    libraries = {name: f"imports {name}" for name in ARRAY_LIBRARIES}
    return scan_package(files, given, libraries, attributes=False)


def scan_package(files: dict[Path, bytes], given: dict[Path, bytes], flagged_modules: dict[str, str] | None = None,
                 attributes: bool = True) -> list[str]:
    """Findings over the submission's package files (relative path -> bytes), leaving out lines the
    course itself gave (`given`: the generated stub and given code)."""
    found = []
    for rel, data in sorted(files.items()):
        if rel.suffix != ".py" or data == given.get(rel):
            continue
        lines = data.decode(errors="replace").splitlines()
        given_lines = set(given.get(rel, b"").decode(errors="replace").splitlines())
        for finding in scan_source(str(rel), "\n".join(lines), flagged_modules, attributes):
            lineno = int(finding.split(":")[1])
            if lines[lineno - 1] not in given_lines:
                found.append(finding)
    return found
