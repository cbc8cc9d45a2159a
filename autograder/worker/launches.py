"""Triton kernels of the package: their names, and a hook on every launch.

The hook wraps the launch entry of Triton's kernel classes (`JITFunction.run` on CUDA,
`InterpretedFunction.run` under TRITON_INTERPRET=1) once per process: each launch is recorded in
the ledger of the test now running, and a launch of the package's own kernel in a kernel exercise
runs inside a profiler scope (KERNEL_SCOPE), so that the ops inside it belong to the kernel. Only
compiled launches are scoped: under TRITON_INTERPRET=1 the kernel body is Python that could call
torch itself, so every op there is accounted like any other.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from autograder.protocol.rules import within

KERNEL_SCOPE = "autograder::kernel"


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

        def run(self, *args, __original=original, cls_name=cls.__name__, **kwargs):
            accountant = current()
            if accountant is None or kwargs.get("warmup", False):
                return __original(self, *args, **kwargs)
            fn = getattr(self, "fn", None)
            module = getattr(fn, "__module__", "?")
            accountant.record_launch(f"{module}.{getattr(fn, '__name__', '?')}")
            # Only a compiled launch is scoped: an interpreted kernel's body is plain Python that
            # could call torch itself (the references need no exemption under the interpreter).
            if cls_name != "JITFunction" or not accountant.scopes_launch(module):
                return __original(self, *args, **kwargs)
            import torch

            accountant.in_launch += 1
            try:
                with torch.autograd.profiler.record_function(KERNEL_SCOPE):
                    return __original(self, *args, **kwargs)
            finally:
                accountant.in_launch -= 1

        cls.run = run
        _HOOKED.add(cls)
