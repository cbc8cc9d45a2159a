"""The import hook that keeps the student's package out of the judge.

Installed first on `sys.meta_path` before any test module loads: `import <package>` and any of
its submodules give a `ModuleProxy` whose attributes live in the worker. No file of the package
is ever read by the judge. After collection the work dir leaves the judge's `sys.path` (the worker
can write files there; a later lazy import must not find one).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from autograder.judge.proxies import ModuleProxy

if TYPE_CHECKING:
    from autograder.judge.client import WorkerClient


class PackageFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Proxies the graded package; refuses the given packages beside it (the student may have
    replaced them: they are student code too, and reach the judge only through the package)."""

    def __init__(self, package: str, client: WorkerClient, given: tuple[str, ...] = ()) -> None:
        self.package, self.client, self.given = package, client, given

    def owns(self, name: str) -> bool:
        return name == self.package or name.startswith(self.package + ".")

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        top = name.split(".")[0]
        if top in self.given:
            raise ImportError(f"{top} is the student's code beside {self.package}: a test reaches it only "
                              f"through {self.package}", name=name)
        if not self.owns(name):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return ModuleProxy(spec.name, self.client)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing runs here: the package's code runs only in the worker."""


def install(package: str, client: WorkerClient, given: list[str] | tuple[str, ...] = ()) -> PackageFinder:
    for top in (package, *given):
        for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
            del sys.modules[name]  # imported by something before the plugin (never by the judge's own code)
    finder = PackageFinder(package, client, tuple(given))
    sys.meta_path.insert(0, finder)
    return finder


def leave_workdir(workdir: str) -> None:
    """Drop the work dir (and folders under it) from the import path."""
    root = os.path.realpath(workdir)

    def inside(entry: str) -> bool:
        real = os.path.realpath(entry or os.getcwd())
        return real == root or real.startswith(root + os.sep)

    sys.path[:] = [p for p in sys.path if not inside(p)]
    sys.path_importer_cache.clear()
