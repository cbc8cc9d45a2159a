"""A static scan of the submission for code that reaches into the grader rather than doing the work.

The worker runs the student's package beside the op accounting and the course timer, which it can
therefore tamper with; the judge bounds what that buys (values re-checked, times bracketed by its
own clock, a ledger that must be complete), and this scan adds a human in the loop: references to
grader or test-framework internals, profiler switches, frame and garbage-collector walking and
`ctypes` are listed for an instructor's review in the report. Nothing here changes a score.
"""

from __future__ import annotations

import ast
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
FLAGGED_ATTRIBUTES = {
    "_getframe": "walks the call stack", "f_back": "walks the call stack", "f_globals": "reads a frame's globals",
    "f_locals": "reads a frame's locals", "settrace": "installs a trace function",
    "setprofile": "installs a profile function", "_disable_profiler": "switches the profiler off",
    "_profiler_enabled": "inspects the profiler", "get_referrers": "walks the garbage collector",
    "get_objects": "walks the garbage collector", "__code__": "rewrites or reads a function's code",
    "getppid": "looks for the judge process",
}


def scan_source(name: str, source: str) -> list[str]:
    """'file:line: what' for each flagged construct in one file (a file that does not parse: none)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for module in modules:
            for flagged, why in FLAGGED_MODULES.items():
                if module == flagged or module.startswith(flagged + "."):
                    found.append(f"{name}:{node.lineno}: {why} ({module})")
                    break
        if isinstance(node, ast.Attribute) and node.attr in FLAGGED_ATTRIBUTES:
            found.append(f"{name}:{node.lineno}: {FLAGGED_ATTRIBUTES[node.attr]} (.{node.attr})")
    return sorted(set(found), key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


def scan_package(files: dict[Path, bytes], given: dict[Path, bytes]) -> list[str]:
    """Findings over the submission's package files (relative path -> bytes), leaving out lines the
    course itself gave (`given`: the generated stub and given code)."""
    found = []
    for rel, data in sorted(files.items()):
        if rel.suffix != ".py" or data == given.get(rel):
            continue
        lines = data.decode(errors="replace").splitlines()
        given_lines = set(given.get(rel, b"").decode(errors="replace").splitlines())
        for finding in scan_source(str(rel), "\n".join(lines)):
            lineno = int(finding.split(":")[1])
            if lines[lineno - 1] not in given_lines:
                found.append(finding)
    return found
