"""The guard of an audit worker: torch's compute ops refused at the dispatcher for the audited call.

A kernel exercise's ledger (autograder/worker/accounting.py) is kept in the submission's process
and is its word. The judge therefore also replays one call of each passed kernel test in a second,
fresh worker started with this guard (autograder/judge/audit.py): every dispatcher op that is not
on the exercise's allowlist (allocation, views, copies, casts, metadata: protocol/rules.py) gets a
kernel that raises, registered for every backend and composite key just before the audited call,
through the dispatcher's entry points as they were before the package loaded. The package's Triton kernels still run (a launch is no torch op; under
TRITON_INTERPRET=1 the interpreter itself uses only allowlisted ops), so the call returns the
right answer only if the package computes it in its own kernels. Nothing here records anything:
a refused op fails the call, and the judge compares the result with what the first worker returned.

Undoing the guard takes torch's private dispatcher API or the registration objects kept here
(reflection that the host's tamper scan flags); an ordinary import, rebinding or profiler switch
does not reach it. Scalar reads (`.item()`, an allowlisted op) stay possible: the ledger's cap on
them per call is the worker's word.
"""

from __future__ import annotations

import warnings
from typing import Any

from autograder.protocol.rules import matches

# The keys a refusal is registered for: the dense backends, the composite kernels every backend
# falls back to (a composite op is refused by its own name, not by what it decomposes into), and
# the layouts through which a tensor could reach other kernels (sparse, nested, quantized, mkldnn).
KEYS = ("CPU", "CUDA", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
        "CompositeExplicitAutogradNonFunctional", "SparseCPU", "SparseCUDA", "NestedTensorCPU",
        "NestedTensorCUDA", "QuantizedCPU", "QuantizedCUDA", "MkldnnCPU")
KEPT_NAMESPACES = ("profiler",)  # record_function scopes: no compute
REFUSED = "refused in the audit worker"


class GuardedOpError(RuntimeError):
    """A torch op outside the exercise's allowlist ran in the audit worker."""


class Guard:
    """Taken before the package imports (the dispatcher's registration entry and the op list are
    held here, so rebinding torch.library or torch._C later changes nothing here); `arm()` before
    the audited call refuses every op off the allowlist, in every namespace, for good. The package
    imports unguarded, as in the first worker (a module constant may be computed with torch)."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        import torch

        self.patterns = patterns
        self._library = torch._C._dispatch_library
        self._names = torch._C._dispatch_get_all_op_names
        self._impl = type(self._library("FRAGMENT", "autograder_guard_probe", "", "guard", 0)).impl
        self._kept: list[object] = []  # the registrations live as long as these modules
        self.armed = False

    def arm(self) -> int:
        """Refuse every op not on the allowlist from now on; the number of registrations."""
        if self.armed:
            return 0
        self.armed = True
        count = 0
        modules: dict[str, object] = {}
        with warnings.catch_warnings():  # "overriding a previously registered kernel": each is on purpose
            warnings.simplefilter("ignore")
            for name in self._names():
                namespace, _, op = name.partition("::")
                if namespace in KEPT_NAMESPACES or allowed(name, self.patterns):
                    continue
                module = modules.get(namespace)
                if module is None:
                    module = modules[namespace] = self._library("IMPL", namespace, "", "guard", 0)
                refuse = _refusal(name)
                for key in KEYS:
                    try:
                        self._impl(module, op, key, refuse, False)
                        count += 1
                    except RuntimeError:  # an op this build cannot register for that key
                        continue
        self._kept.extend(modules.values())
        return count


def _refusal(name: str) -> Any:
    def refuse(*args: object, **kwargs: object) -> object:
        raise GuardedOpError(f"{name} {REFUSED}: outside its own Triton kernels a kernel exercise may only "
                             "allocate, view, copy and cast tensors")
    return refuse


def allowed(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether op `name` ("aten::view.dtype") is on the allowlist, by its full name or its base name."""
    return matches(name, patterns) is not None or matches(name.split(".", 1)[0], patterns) is not None
