"""The course timer for test authors: warm-up, L2 flush, CUDA events, many reps, rotated inputs.

Perf tests time the student's code and a baseline with the same `measure` in the same run, and
grade the ratio of `Timing.graded_s` (the mean: the statistic the judge's clock vouches for, see
autograder/judge/bracket.py). On CPU it falls back to `time.perf_counter` (reported, never
asserted on in CPU tests).

- In the judge, `measure(f)` of a worker callable (a function of the package, or what an
  `in_worker` helper returned, e.g. `lambda q, k, v: flash_attention(q, k, v)`) times it in the
  worker, bracketed by the judge's clock, and audits one more call there (autograder/judge/bracket.py);
  `Timing.output` is what that call returned. `measure` of a judge function (the baseline, in
  `oracle()`) times it in the judge.
- `inputs=[set_0, ..., set_K-1]` (argument tuples of distinct values): f is called as f(*args) on
  static buffers; before repetition i its set is copied into them (outside the timed span). The
  submission is timed on K = reps sets, one per repetition: no timed repetition sees inputs
  another saw, so a cache keyed on their content never hits (the warm-up runs on set 0 with its
  floating-point tensors negated: no repetition's values). The worker keeps a copy of every repetition's output; after the loop the judge
  draws `CHECKED_REPS` repetitions (the worker cannot know which) and fetches only theirs, and
  `check(k, output)` re-checks them, the last graph replay's and the audited call's against set k.
  A stale or wrong output fails the test. The judge's own baselines, timed in the judge (where
  no cache can gain), may use MIN_SETS <= K < reps sets in consecutive runs.
  `work=Work(flops=, bytes=)` holds a time past what the card can do (autograder/judge/ceilings.py).
- In a kernel exercise (`compute_in_kernels`) a worker callable is timed in the audit worker,
  where torch's compute ops are refused (autograder/judge/audit.py): it must be a package function
  or what an `in_worker` helper with plain arguments returned, so that it can be made again there.
- In the worker (inside an `in_worker` function) with accounting rules, the warm-up and timed
  repetitions record nothing and one more call is the perf audit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autograder.judge.ceilings import Work
from autograder.testing import in_the_worker
from autograder.worker import accounting, feed, timer
from autograder.worker.timer import L2_FLUSH_BYTES, Timing

__all__ = ["L2_FLUSH_BYTES", "MIN_SETS", "Timing", "Work", "copy_bandwidth", "measure"]

# Distinct input sets a judge-side baseline needs at least (its code cannot cache; two sets still
# catch a baseline that reads the wrong buffer). The submission needs one set per repetition:
# with fewer, a cache keyed on the inputs' content answers every repetition after each set's
# first, up to reps - K of reps, and nothing in the times shows it. Perf tests size reps so that
# reps sets (judge) plus reps kept outputs (worker) stay under ~10 GB (see each test's comment).
MIN_SETS = 2
Check = Callable[[int, Any], None]


def measure(
    fn: Callable[..., object],
    *,
    warmup: int = 3,
    reps: int = 20,
    flush_l2: bool = True,
    device: object | None = None,
    cuda_graph: bool = False,
    inputs: Sequence[tuple] | None = None,
    check: Check | None = None,
    work: Work | None = None,
) -> Timing:
    """Time `fn()` (or `fn(*set)` with `inputs`); on CUDA with events around each call, flushing L2
    before each repetition.

    cuda_graph: capture fn once in a CUDA graph (after the warm-up) and time its replays, as a
    serving engine runs a decode step: the host's launch work (Python, argument checks, the
    Triton launcher) is out of the timing, only the GPU's time is in. For calls of tens of
    microseconds, where launching costs more than the kernel; the audit call stays eager. Ignored
    on CPU. With inputs, the graph reads the static buffers the sets are copied into.

    inputs, check: see the module's docstring; `check` is required when a worker callable is timed
    on input sets. work: the work of one call, checked against the card's ceilings."""
    if warmup < 0 or reps < 1:
        raise ValueError(f"measure: warmup={warmup} must be >= 0 and reps={reps} >= 1")
    acct = accounting.current()  # set where the submission runs: the worker (or an in-process judge)
    in_judge = acct is None and not in_the_worker()
    sets = _checked_sets(inputs, reps, judge_baseline=in_judge and not _is_worker_callable(fn))
    if in_judge:
        return _measure_in_judge(fn, warmup, reps, flush_l2, device, cuda_graph, sets, check, work)
    keep = None if sets is None else frozenset(feed.pick_checked(reps))  # in the worker: its own word
    if acct is None or not acct.recording:  # no rules, or the test's oracle is being timed
        timing = timer.timed(fn, warmup, reps, flush_l2, device, cuda_graph, sets, keep)
        if sets is not None and check is not None:
            _check_outputs(timing, sets, check, reps)
        return timing
    with acct.paused():
        timing = timer.timed(fn, warmup, reps, flush_l2, device, cuda_graph, sets, keep)
    audited = fn if sets is None else (lambda: fn(*sets[-1]))  # the set of the last repetition
    acct.audit(audited, cuda=timer.cuda_device(device) is not None)
    if hits := acct.forbidden_hits():  # no credit can follow: stop the test now, not after its sweep
        raise RuntimeError("perf audit: " + "; ".join(hits))
    if sets is not None and check is not None:
        with acct.paused():  # the test's own oracle work, not the submission's ops
            _check_outputs(timing, sets, check, reps)
    return timing


def _is_worker_callable(fn: object) -> bool:
    from autograder.judge.proxies import BoundMethod, Remote

    return isinstance(fn, (Remote, BoundMethod))


def _checked_sets(inputs: Sequence[tuple] | None, reps: int, judge_baseline: bool) -> list[tuple] | None:
    if inputs is None:
        return None
    sets = [tuple(one) if type(one) in (tuple, list) else one for one in inputs]
    if not judge_baseline and len(sets) != reps:
        raise ValueError(f"measure: timing the submission needs one distinct input set per repetition "
                         f"(got {len(sets)} sets for reps={reps}): with fewer, a cache keyed on the inputs' "
                         f"content answers every repetition after a set's first, and its time is not the work's")
    if len(sets) < MIN_SETS or reps < len(sets):
        raise ValueError(f"measure: inputs needs at least {MIN_SETS} sets and reps >= the number of sets "
                         f"(got {len(sets)} sets, reps={reps})")
    feed.check_sets(sets)
    for i in range(len(sets)):
        for j in range(i):
            if _same_values(sets[i], sets[j]):
                raise ValueError(f"measure: input sets {j} and {i} hold the same values; a cache would answer both")
    return sets


def _same_values(a: tuple, b: tuple) -> bool:
    import torch

    return all(torch.equal(x, y) if type(x) is torch.Tensor else x == y for x, y in zip(a, b, strict=True))


def _check_outputs(timing: Timing, sets: list[tuple], check: Check, reps: int, audited: bool = False) -> None:
    """check(k, output) on the kept outputs of the chosen repetitions, the replayed and the audited
    call's: the failure says a timed repetition returned a wrong result (a stale cached answer,
    skipped work)."""
    last = len(sets) - 1  # the set of the last timed repetition, left in the buffers for the audit
    cases = []
    for i, out in timing.outputs:  # (repetition, its kept output)
        k = feed.set_of(i, reps, len(sets))
        cases.append((k, out, f"timed repetition {i} (input set {k})"))
    if timing.replayed is not None:
        cases.append((last, timing.replayed, f"the last graph replay (input set {last})"))
    if audited:
        cases.append((last, timing.output, f"the audited call (input set {last})"))
    for k, out, what in cases:
        try:
            check(k, out)
        except AssertionError as exc:
            raise AssertionError(f"measure: the output of {what} is wrong, so the time is not credited "
                                 f"(an answer cached from other inputs, or work skipped while timed): {exc}") from None


def _measure_in_judge(fn: Callable[..., object], warmup: int, reps: int, flush_l2: bool, device: object | None,
                      cuda_graph: bool, sets: list[tuple] | None, check: Check | None, work: Work | None) -> Timing:
    from autograder.judge import bracket, ceilings, this_run
    from autograder.judge.proxies import BoundMethod, Remote

    if isinstance(fn, (Remote, BoundMethod)):
        if sets is not None and check is None:
            raise ValueError("measure: timing the submission on input sets needs check=, which re-checks "
                             "the outputs of timed repetitions against the oracle of each set")
        def verify(timing: Timing) -> None:  # before the bracket's claim check: the sharper verdicts first
            if sets is not None and check is not None:
                _check_outputs(timing, sets, check, reps, audited=True)
            ceilings.check(work, timing.graded_s, device)

        return bracket.measure_remote(fn, warmup=warmup, reps=reps, flush_l2=flush_l2, device=device,
                                      cuda_graph=cuda_graph, sets=sets, verify=verify)
    client = this_run.client_if_started()
    before = client.calls if client is not None else 0
    keep = None if sets is None else frozenset(feed.pick_checked(reps))  # the judge's own code: chosen ahead
    timing = timer.timed(fn, warmup, reps, flush_l2, device, cuda_graph, sets, keep)
    if client is not None and client.calls != before:
        raise TypeError("measure: this function calls the submission through the judge (each call a request); "
                        "time a worker callable instead, e.g. what an in_worker helper returns")
    if sets is not None and check is not None:
        _check_outputs(timing, sets, check, reps)
    return timing


def copy_bandwidth(nbytes: int = 1 << 30, *, device: object | None = None, warmup: int = 3,
                   reps: int = 20) -> float:
    """Copy bandwidth of `dst.copy_(src)` on `nbytes`-byte tensors, in bytes/s read plus written:
    the same-run ceiling perf tests divide by (per `Timing.graded_s`, as the kernels they compare)."""
    import torch

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    src = torch.ones(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    timing = measure(lambda: dst.copy_(src), warmup=warmup, reps=reps, device=dev)
    return 2 * nbytes / timing.graded_s
