"""Op and kernel accounting: what a submission really ran while a graded test called it.

Three ledgers per test, all kept outside `autograder.testing.oracle()` blocks:

- **Dispatcher ops**, recorded by torch's profiler (Kineto, CPU activity). The profiler's
  RecordFunction callbacks fire inside the dispatcher for every op that enters it, composite
  ops included (`aten::scaled_dot_product_attention`, `aten::_scaled_dot_product_attention_math`),
  however Python reached it: `F.…`, `torch.ops.aten.…`, `torch._C._nn.…`, a captured alias, and
  even inside `torch._C._DisableTorchDispatch()`. A `TorchDispatchMode` would not do: it only
  sees ops after composite decomposition (the math fallback of SDPA arrives as bmm + softmax),
  and a student can switch it off without trace. Switching the profiler off is visible: the
  session is gone when the test ends, and the test fails as tampered with.
- **Triton launches**, recorded by wrapping `JITFunction.run` (CUDA) and
  `InterpretedFunction.run` (`TRITON_INTERPRET=1`): the module and name of every kernel launched.
- **Device kernels** (CUDA only), recorded by one profiled call of every timed function in
  `autograder.timing.measure` (the perf audit): library kernels the assignment forbids (cuDNN,
  flash, fmha, GEMMs) fail the test, and graph replays still show the student's kernels by name.

A forbidden op or kernel, or a required kernel that never ran, fails the test with a reason
naming it. Rules come from the spec's `[accounting]` table and the `kernels` test mark.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from autograder.protocol.rules import AccountingRules, Ledger, forbidden_hits, verdict, within

_current: Accountant | None = None


def current() -> Accountant | None:
    """The accountant of the test now running, if the assignment has accounting rules."""
    return _current


class _Session:
    """One profiler session; `stop()` returns the names of its events, split by where they ran."""

    def __init__(self, cuda: bool) -> None:
        import torch

        self._torch = torch
        self._prof = torch.autograd.profiler.profile(use_kineto=True, use_device="cuda" if cuda else None)
        self._prof._prepare_trace()
        self._prof._start_trace()

    def stop(self) -> tuple[Counter, Counter] | None:
        """(host op names, device kernel names), or None when someone else ended the session."""
        if not self._torch.autograd._profiler_enabled():
            return None
        results = self._torch.autograd._disable_profiler()  # raw events: no FunctionEvent tree to build
        host, device = Counter(), Counter()
        for event in results.events():
            on_host = event.device_type() == self._torch.autograd.DeviceType.CPU
            (host if on_host else device)[event.name()] += 1
        return host, device


class Accountant:
    """Keeps the ledger of one test: started before the test body, ended after it."""

    def __init__(self, rules: AccountingRules, package: str, required: tuple[str, ...]) -> None:
        self.rules, self.package, self.required = rules, package, required
        self.ledger = Ledger()
        self._session: _Session | None = None
        self._pause_depth = 0
        self._audit_cuda: bool | None = None  # set while `audit` runs

    # ---- lifecycle -------------------------------------------------------------------------
    def begin(self) -> None:
        global _current
        _current = self
        if self.required:
            _install_launch_hook()
        self._resume()

    def end(self) -> str:
        """Stop recording; the reason this test fails its accounting, or "" when it passes."""
        global _current
        if self._pause_depth == 0:
            self._pause()
        _current = None
        return self.verdict()

    @property
    def recording(self) -> bool:
        return _current is self and self._pause_depth == 0

    def _resume(self) -> None:
        if self.rules.forbidden_ops or self._audit_cuda is not None:
            self._session = _Session(cuda=bool(self._audit_cuda))

    def _pause(self) -> None:
        if self._session is None:
            return
        names = self._session.stop()
        self._session = None
        if names is None:
            self.ledger.problems.append("the op accounting was switched off during the test (tampering)")
            return
        self.ledger.ops.update(names[0])
        self.ledger.device_kernels.update(names[1])

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing is recorded inside (the test's oracle, the timed repetitions of a perf test).
        Entered from the submission's own code, it pauses nothing and fails the test."""
        if module := called_from_package(self.package):
            self.ledger.problems.append(f"{module} tried to pause the op accounting (tampering)")
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


def called_from_package(package: str) -> str:
    """The module of the first frame on the current stack inside `package`, or "" if none is."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if within(module, package):
            return module
        frame = frame.f_back
    return ""


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


def _install_launch_hook() -> None:
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
            if _current is not None and not kwargs.get("warmup", False):
                fn = getattr(self, "fn", None)
                _current.record_launch(f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__name__', '?')}")
            return __original(self, *args, **kwargs)

        cls.run = run
        _HOOKED.add(cls)
