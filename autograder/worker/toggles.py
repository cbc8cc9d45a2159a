"""The profiler's own switches, guarded: the op accounting's session may only be paused, stopped or
restarted by the grader.

torch exposes private toggles that silence a running profiler without ending it
(`torch.autograd._toggle_collection_dynamic`, `torch._C._autograd._enable_record_function`): the
session stays "enabled", so a check that it still runs at the end of the test passes while the ops
in between went unrecorded. `guard()` (run by `trust`'s caller before the package imports) replaces
each switch, in `torch._C._autograd` and in every loaded torch module that imported it, with a
wrapper that calls the original only when no foreign frame is on the stack (`trust.foreign_caller`)
while a test's op accounting records. From the package it then records the attempt as tampering in
the test's ledger and raises, so nothing is paused; where nothing is accounted (no rules, or
outside a test) a package may run torch's profiler for itself. Reaching an original anyway needs reflection (gc, closures, frames), which the host's
scan flags.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

SWITCHES = ("_toggle_collection_dynamic", "_enable_record_function", "_disable_profiler",
            "_disable_profiler_legacy", "_enable_profiler", "_enable_profiler_legacy", "_prepare_profiler")
_guarded: dict[str, Callable[..., Any]] = {}


def guard(package: str) -> list[str]:
    """Wrap each profiler switch wherever a loaded torch module holds it; the names wrapped."""
    try:
        from torch._C import _autograd
    except ImportError:
        return []
    originals = {name: getattr(_autograd, name) for name in SWITCHES if hasattr(_autograd, name)}
    wrappers = {name: _wrapper(name, fn, package) for name, fn in originals.items()}
    by_id = {id(fn): name for name, fn in originals.items()}
    for mod_name, module in list(sys.modules.items()):
        if module is None or not (mod_name == "torch" or mod_name.startswith("torch.")):
            continue
        namespace = getattr(module, "__dict__", {})
        for attr, value in list(namespace.items()):
            name = by_id.get(id(value))
            if name is not None and value is originals[name]:
                setattr(module, attr, wrappers[name])
    _guarded.update(wrappers)
    return sorted(wrappers)


def _wrapper(name: str, original: Callable[..., Any], package: str) -> Callable[..., Any]:
    def switch(*args: Any, **kwargs: Any) -> Any:
        from autograder.worker import accounting, trust

        acct = accounting.current()
        protected = acct is not None and (acct.rules.records_ops or acct.auditing)  # a session runs for it
        if acct is not None and protected and (where := trust.foreign_caller(package)):
            acct.ledger.problems.append(f"the submission called the profiler's switch {name} at {where} "
                                        "(tampering with the op accounting)")
            raise RuntimeError(f"torch's profiler switch {name} is the grader's while a test runs")
        return original(*args, **kwargs)

    switch.__name__ = switch.__qualname__ = name
    return switch
