"""Triton kernels of the package: their names, and a hook on every launch.

The hook wraps the launch entry of Triton's kernel classes (`JITFunction.run` on CUDA,
`InterpretedFunction.run` under TRITON_INTERPRET=1) once per process: each launch is recorded in
the ledger of the test now running. No launch is a scope whose ops are exempt from the accounting:
the Python a launch runs (a grid callable, pre-run and launch hooks, an argument's `data_ptr`, and
under TRITON_INTERPRET=1 the kernel body itself) is the submission's and could call torch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from autograder.protocol.rules import within


def own_kernel_names(package: str) -> dict[str, str]:
    """Kernel name -> defining module, for every Triton kernel defined in the student's package."""
    found = {}
    for mod_name, module in list(sys.modules.items()):
        if module is None or not within(mod_name, package):
            continue
        for value in list(vars(module).values()):
            fn = _kernel_function(value)
            if fn is not None and getattr(fn, "__module__", "") == mod_name:
                found[fn.__name__] = mod_name
    return found


def _kernel_function(value: object) -> Callable | None:
    """The Python function behind a Triton kernel object (jit, interpreted, autotuned), if any."""
    for _ in range(4):  # Autotuner / Heuristics wrap a JITFunction in `.fn`
        fn = getattr(value, "fn", None)
        if fn is None or not type(value).__module__.startswith("triton."):
            return None
        if not type(fn).__module__.startswith("triton."):
            return fn
        value = fn
    return None


_HOOKED: set[type] = set()


def install_launch_hook(current: Callable[[], Any]) -> None:
    """Wrap the launch entry of Triton's kernel classes once per process (idempotent)."""
    classes = []
    try:
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    for cls in classes:
        if cls in _HOOKED:
            continue
        original = cls.run

        def run(self, *args, __original=original, **kwargs):
            accountant = current()
            if accountant is None or kwargs.get("warmup", False):
                return __original(self, *args, **kwargs)
            fn = getattr(self, "fn", None)
            module = getattr(fn, "__module__", "?")
            accountant.record_launch(f"{module}.{getattr(fn, '__name__', '?')}")
            return __original(self, *args, **kwargs)

        cls.run = run
        _HOOKED.add(cls)
