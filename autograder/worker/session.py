"""One graded test as the worker sees it: forbidden APIs patched, the op and kernel accounting
running, the RNGs seeded; and the timed phases of a perf measurement the judge brackets.

Everything here runs beside the student's code and is trusted only as far as the judge checks it:
the ledger it returns is judged by the judge's own rules (a missing or inconsistent one fails the
test), and the times it reports must agree with the judge's own clock around the timed phase.
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Callable
from typing import Any

from autograder.protocol.rules import AccountingRules, own_kernel_share
from autograder.worker import accounting, forbid, ranks, timer
from autograder.worker.feed import Feed, copy_of

CALL_MARKER = "autograder::call"  # a zero-length profiler range put down at every call the judge makes


class TestSession:
    __test__ = False  # not a pytest test class

    def __init__(self, nodeid: str, forbidden: list[str], rules: AccountingRules, required: tuple[str, ...],
                 package: str) -> None:
        self.nodeid, self.package = nodeid, package
        self._forbidden, self._rules, self._required = forbidden, rules, required
        self._patches: list[forbid.Patch] = []
        self.accountant: accounting.Accountant | None = None
        self._pause: Any = None  # the accounting's pause held from a measurement's warm-up to its audit

    def begin(self) -> None:
        seed = int.from_bytes(hashlib.sha256(self.nodeid.encode()).digest()[:4], "little")
        seed += ranks.rank_of_this_process() or 0  # each rank of a multi-rank test draws its own stream
        random.seed(seed)
        if (torch := sys.modules.get("torch")) is not None:
            torch.manual_seed(seed)
        self._patches = forbid.apply(self._forbidden, self.package)
        if self._rules.active or self._required:
            self.accountant = accounting.Accountant(self._rules, self.package, self._required)
            self.accountant.begin()

    def mark_call(self) -> None:
        """A marker the ledger must show once per top-level call (a profiler switched off loses them)."""
        if self.accountant is not None and self.accountant.recording and self._rules.records_ops:
            import torch

            with torch.autograd.profiler.record_function(CALL_MARKER):
                pass

    def end(self) -> dict[str, Any] | None:
        self.resume()
        forbid.restore(self._patches)
        self._patches = []
        if self.accountant is None:
            return None
        self.accountant.end()
        return self.accountant.export().to_json()

    # ---- the phases of a bracketed measurement ----------------------------------------------
    def warmup(self, fn: Callable[..., object], count: int, flush_l2: bool, device: Any, prime: bool,
               cuda_graph: bool = False, first: tuple | None = None, reps: int = 0) -> None:
        """Pauses the accounting until the audit (stopping the profiler costs milliseconds: never
        inside the phase the judge brackets). With `first` (input sets), binds fn to static
        buffers holding that set, and reserves memory for the `reps` output copies the timed
        phase keeps (allocating them there would cost time the judge's estimate does not hold).
        With cuda_graph, captures the call here, outside the bracket, for the timed phase to replay."""
        if self._pause is None and self.accountant is not None:
            self._pause = self.accountant.paused()
            self._pause.__enter__()
        self._feed = (fn, Feed.of(first)) if first is not None else None
        call = self.bound(fn)
        out = None
        for _ in range(count):
            out = call()
        if first is not None and count > 0:  # freed at once: the allocator keeps the blocks for the loop's copies
            reserved = [copy_of(out) for _ in range(reps)]
            del reserved
        if cuda_graph:
            self._replay = (fn, timer.capture(call, device))
        if prime:  # the timing loop's own first-use costs (events, the L2 scratch) outside the bracket
            timer.samples(lambda: None, 2, flush_l2, device)
        timer.synchronize(device)

    def bound(self, fn: Callable[..., object]) -> Callable[[], object]:
        """fn as the timed call: bound to the static input buffers of its warm-up, if it had any."""
        owner, feed = getattr(self, "_feed", None) or (None, None)
        return feed.bind(fn) if owner is fn else fn

    def timed(self, fn: Callable[..., object], reps: int, flush_l2: bool, device: Any,
              cuda_graph: bool = False, sets: list | None = None) -> Any:
        """The samples; with `sets`, a copy of every repetition's output stays here for `outputs`."""
        feed = None
        if sets is not None:
            owner, feed = getattr(self, "_feed", None) or (None, None)
            if owner is not fn:
                raise RuntimeError("measure(inputs=...): no input buffers were bound for this call in its warm-up")
            feed.rotate(list(sets))
        call = self.bound(fn)
        if cuda_graph:
            captured, call = getattr(self, "_replay", (None, None))
            if captured is not fn:
                raise RuntimeError("measure(cuda_graph=True): no graph captured for this call in its warm-up")
        if feed is None:
            return timer.samples(call, reps, flush_l2, device)
        times = timer.samples(call, reps, flush_l2, device, feed)
        timer.synchronize(device)
        feed.sets = []  # the sources go with this request; the kept outputs wait for `outputs`
        return times

    def outputs(self, fn: Callable[..., object], reps: list[int]) -> list[Any]:
        """The kept outputs of the timed repetitions the judge chose after the loop (then all dropped)."""
        owner, feed = getattr(self, "_feed", None) or (None, None)
        if owner is not fn or type(reps) is not list or not all(type(i) is int for i in reps):
            raise RuntimeError("measure(inputs=...): no timed repetitions of this call to return outputs of")
        return feed.take(reps)

    def replayed(self, fn: Callable[[], object], device: Any) -> Any:
        """What the last timed replay of fn's graph wrote (still inside the paused accounting)."""
        captured, replay = getattr(self, "_replay", (None, None))
        if captured is not fn:
            raise RuntimeError("measure(cuda_graph=True): no graph captured for this call in its warm-up")
        return timer.replayed_output(replay, device)

    def resume(self) -> None:
        if self._pause is not None:
            pause, self._pause = self._pause, None
            pause.__exit__(None, None, None)

    def audit(self, fn: Callable[[], object], device: Any) -> tuple[object, list[str], float | None]:
        """One more call with everything recorded: (its output, forbidden hits so far, the share
        of the audited GPU time in the package's own kernels in a kernel exercise, else None).
        The judge shows the last two; it decides from the ledger at the end of the test."""
        self.resume()
        out: list[object] = []
        if self.accountant is None:
            return fn(), [], None
        self.accountant.audit(lambda: out.append(fn()), cuda=timer.cuda_device(device) is not None)
        share = own_kernel_share(self.accountant.export()) if self._rules.compute_in_kernels else None
        return (out[0] if out else None), self.accountant.forbidden_hits(), share

    def _quiet(self) -> Any:
        from contextlib import nullcontext

        return self.accountant.paused() if self.accountant is not None else nullcontext()
