"""Op and kernel accounting: what a submission really ran while a graded test called it.

Three ledgers per test, all kept outside `autograder.testing.oracle()` blocks:

- **Dispatcher ops**, recorded by torch's profiler (Kineto, CPU activity, every thread of the
  process, not only the one that started it). The profiler's
  RecordFunction callbacks fire inside the dispatcher for every op that enters it, composite
  ops included (`aten::scaled_dot_product_attention`, `aten::_scaled_dot_product_attention_math`),
  however Python reached it: `F.…`, `torch.ops.aten.…`, `torch._C._nn.…`, a captured alias, and
  even inside `torch._C._DisableTorchDispatch()`. A `TorchDispatchMode` would not do: it only
  sees ops after composite decomposition (the math fallback of SDPA arrives as bmm + softmax),
  and a student can switch it off without trace. Switching the profiler off is visible: the
  session is gone when the test ends, and the test fails as tampered with; its private switches
  (pausing collection while the session stays "enabled") refuse the package (toggles.py).
- **Triton launches**, recorded by wrapping `JITFunction.run` (CUDA) and
  `InterpretedFunction.run` (`TRITON_INTERPRET=1`): the module and name of every kernel launched.
- **Device kernels** (CUDA only), recorded by one profiled call of every timed function in
  `autograder.timing.measure` (the perf audit): library kernels the assignment forbids (cuDNN,
  flash, fmha, GEMMs) fail the test, and graph replays still show the student's kernels by name.

A forbidden op or kernel, or a required kernel that never ran, fails the test with a reason
naming it. Rules come from the spec's `[accounting]` table and the `kernels` test mark.

In a kernel exercise (`compute_in_kernels`) every dispatcher op of the test goes to the ledger's
`outside_ops`, which the judge checks against the allowlist: a compiled Triton launch issues no
dispatcher op of its own, and none is exempt, because the Python that a launch runs (a grid
callable, pre-run and launch hooks, an argument's `data_ptr`, an interpreted kernel body) is the
submission's and could compute in torch. A torch-function mode notes where in the package each
torch function was first called, so that a refused op can be shown with the line that called it
(best effort: it decides nothing).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from autograder.protocol.rules import DISPATCHER_OP, AccountingRules, Ledger, forbidden_hits, verdict, within
from autograder.worker.launches import install_launch_hook, own_kernel_names
from autograder.worker.sites import Sites, short_name
from autograder.worker.trust import foreign_caller, pinned, restore

MAX_SITES = 256
SESSION_MARKER = "autograder::session"  # opens every profiler session of the accounting
LEAVING_DEVICE = frozenset({"cpu", "numpy", "tolist"})
_current: Accountant | None = None


def current() -> Accountant | None:
    """The accountant of the test now running, if the assignment has accounting rules."""
    return _current


class _Session:
    """One profiler session; `stop()` returns the names of its events, split by where they ran.

    In the worker (`trust.pinned()`) it records every thread of the process; the grader's own
    in-process tests of this module record the starting thread only, as torch's profiler does."""

    def __init__(self, cuda: bool) -> None:
        import torch

        self._torch = torch
        self._all_threads = pinned() and _all_threads() is not None
        try:
            self._start(cuda, _all_threads() if self._all_threads else None)
        except RuntimeError:  # a Kineto build that refuses the option: the starting thread only
            self._all_threads = False
            self._start(cuda, None)
        with torch.autograd.profiler.record_function(SESSION_MARKER):  # gone if another session replaced this one
            pass

    def _start(self, cuda: bool, config: Any) -> None:
        self._prof = self._torch.autograd.profiler.profile(use_kineto=True, use_device="cuda" if cuda else None,
                                                           experimental_config=config)
        self._prof._prepare_trace()
        self._prof._start_trace()

    def stop(self) -> tuple[Counter, Counter, Counter, Counter] | None:
        """(host op names, device kernel names, dispatcher ops, device nanoseconds per kernel name),
        or None when someone else ended the session (its opening marker is missing: an all-threads
        session is not in `_profiler_enabled()`, which reads the calling thread's state)."""
        if not self._all_threads and not self._torch.autograd._profiler_enabled():
            return None
        results = self._torch.autograd._disable_profiler()  # raw events: no FunctionEvent tree to build
        host, device, device_ns, ops = Counter(), Counter(), Counter(), Counter()
        for event in results.events():
            name = event.name()
            if event.device_type() != self._torch.autograd.DeviceType.CPU:
                if event.is_user_annotation():  # a record_function scope's GPU span, not a kernel
                    continue
                device[name] += 1
                device_ns[name] += max(0, event.duration_ns())
                continue
            host[name] += 1
            if DISPATCHER_OP.match(name) and not name.startswith("autograder::"):
                ops[name] += 1
        if host.pop(SESSION_MARKER, 0) != 1:
            return None
        return host, device, ops, device_ns


def _all_threads() -> Any:
    """Kineto's option to record the ops of every thread: by default only the thread that started
    the session is recorded, and a package could compute in a `threading.Thread` of its own."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return _ExperimentalConfig(profile_all_threads=True)
    except (ImportError, TypeError):  # a torch without the option (before 2.8): the starting thread only
        return None


class Accountant:
    """Keeps the ledger of one test: started before the test body, ended after it."""

    def __init__(self, rules: AccountingRules, package: str, required: tuple[str, ...]) -> None:
        self.rules, self.package, self.required = rules, package, required
        self.ledger = Ledger()
        self._session: _Session | None = None
        self._pause_depth = 0
        self._audit_cuda: bool | None = None  # set while `audit` runs
        self._sites: Sites | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def begin(self) -> None:
        global _current
        _current = self
        if self.required:
            install_launch_hook(current)
        self._resume()

    def end(self) -> str:
        """Stop recording; the reason this test fails its accounting, or "" when it passes."""
        global _current
        if self._pause_depth == 0:
            self._pause()
        _current = None
        for name in restore():  # the grader's modules as the worker pinned them (see trust.py)
            self.ledger.problems.append(f"the submission replaced the grader's {name} (tampering)")
        return self.verdict()

    @property
    def auditing(self) -> bool:
        """Whether a perf audit's call runs now (its session records device kernels)."""
        return self._audit_cuda is not None

    @property
    def recording(self) -> bool:
        return _current is self and self._pause_depth == 0

    def _resume(self) -> None:
        if self.rules.records_ops or self._audit_cuda is not None:
            self._session = _Session(cuda=bool(self._audit_cuda))
        if self.rules.compute_in_kernels:
            self._sites = Sites.push(self)

    def _pause(self) -> None:
        if self._sites is not None:
            self._sites.pop()
            self._sites = None
        if self._session is None:
            return
        names = self._session.stop()
        self._session = None
        if names is None:
            self.ledger.problems.append("the op accounting was switched off during the test (tampering)")
            return
        self.ledger.ops.update(names[0])
        self.ledger.device_kernels.update(names[1])
        if self.rules.compute_in_kernels:
            self.ledger.outside_ops.update(names[2])
            self.ledger.device_ns.update(names[3])

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing is recorded inside (the test's oracle, the timed repetitions of a perf test).
        Asked for with the submission's code on the stack (trust.py decides by identity, not by
        module name), it pauses nothing and fails the test."""
        if where := called_from_package(self.package):
            self.ledger.problems.append(f"{where} tried to pause the op accounting (tampering)")
            yield
            return
        if self._pause_depth == 0:
            self._pause()
        self._pause_depth += 1
        try:
            yield
        finally:
            self._pause_depth -= 1
            if self._pause_depth == 0 and _current is self:
                self._resume()

    def audit(self, fn: Callable[[], object], cuda: bool) -> None:
        """Run `fn` once more with host ops, Triton launches and (on CUDA) device kernel names
        recorded; an `oracle()` block inside `fn` is left out as everywhere else."""
        self._pause()
        self._audit_cuda = cuda
        self._resume()
        try:
            fn()
            if cuda:
                import torch

                torch.cuda.synchronize()
        finally:
            self._pause()
            self._audit_cuda = None
            self._resume()

    def record_launch(self, qualified_name: str) -> None:
        if self.recording:
            self.ledger.launches[qualified_name] += 1

    def note_site(self, name: str, args: tuple = (), kwargs: dict | None = None) -> None:
        """Where in the package the torch function `name` was first called; and, in a kernel
        exercise, a device tensor the package moves to the host (`.cpu()`, `.numpy()`,
        `.tolist()`, `.to("cpu")`: the side door around the kernels on CUDA)."""
        if not self.recording:
            return
        key = short_name(name)
        leaves = key in LEAVING_DEVICE or (key == "to" and _to_host(args, kwargs or {}))
        leaves = leaves and bool(args) and getattr(args[0], "is_cuda", False)
        if (key in self.ledger.sites or len(self.ledger.sites) >= MAX_SITES) and not leaves:
            return
        site = self._package_site(sys._getframe(2))
        if site and key not in self.ledger.sites and len(self.ledger.sites) < MAX_SITES:
            self.ledger.sites[key] = site
        if site and leaves:
            self.ledger.problems.append(f"the submission moved a GPU tensor to the host ({name} at {site}): in a "
                                        "kernel exercise the computing stays in the package's kernels")

    def _package_site(self, frame: Any) -> str:
        while frame is not None:
            module = frame.f_globals.get("__name__", "")
            if within(module, self.package):
                return f"{module.replace('.', '/')}.py:{frame.f_lineno}"
            frame = frame.f_back
        return ""

    # ---- verdict ---------------------------------------------------------------------------
    def export(self) -> Ledger:
        """The ledger with the package's own kernel names filled in (what the judge decides from)."""
        self.ledger.own_kernels = own_kernel_names(self.package)
        return self.ledger

    def forbidden_hits(self) -> list[str]:
        """Tampering, forbidden ops and forbidden device kernels recorded so far."""
        return forbidden_hits(self.export(), self.rules)

    def verdict(self) -> str:
        return verdict(self.export(), self.rules, self.required)


def _to_host(args: tuple, kwargs: dict) -> bool:
    """Whether a `Tensor.to(...)` call names the CPU as its target device."""
    for value in (*args[1:2], kwargs.get("device")):
        if str(value).startswith("cpu"):
            return True
    return False


def called_from_package(package: str) -> str:
    """Where the submission's code is on the current stack ("" if nowhere): a frame that is neither
    code the worker compiled from the master tests nor in a module loaded before the package
    (trust.foreign_caller); a name such as `__name__` decides nothing."""
    return foreign_caller(package)


