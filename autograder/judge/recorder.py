"""The judge's record of a run: one HMAC-signed JSON line per test (and per collection error), written
from pytest's hooks, with the verdict the judge reaches from its own assertions, the worker's
ledger and a kernel exercise's guarded audit (judge/plugin.py registers it for a described run)."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
from typing import Any

import pytest

from autograder.hardware import cuda_device_count, has_cuda
from autograder.judge import importer, this_run
from autograder.judge.feedback import failure_reason, hidden_reason, hidden_violation
from autograder.judge.ranks import Guards
from autograder.judge.verdict import MAX_OUTPUT_CHARS, TestState, record_of
from autograder.protocol.messages import HeldForReview, RecordKind
from autograder.protocol.rules import AccountingRules, Ledger, verdict
from autograder.protocol.run import OPT_KEY_FD, RunDescription
from autograder.worker.session import CALL_MARKER

GPU_SKIP_REASON = "not graded here: needs a CUDA GPU"


def world_of(item: pytest.Item) -> tuple[int, str]:
    """(world size, backend) of a multi-rank test; (1, "") for any other test."""
    mark = item.get_closest_marker("world_size")
    if mark is None:
        return 1, ""
    world = mark.args[0] if mark.args else mark.kwargs.get("n", 1)
    return int(world), str(mark.kwargs.get("backend", "gloo"))


def points_of(item: pytest.Item) -> float:
    mark = item.get_closest_marker("points")
    if mark is None:
        return 1.0
    value = mark.args[0] if mark.args else mark.kwargs.get("n", 1)
    return float(value)


class Recorder:
    """Writes one signed record per test (and per collection error), from pytest's hooks."""

    def __init__(self, config: pytest.Config, run: RunDescription | None) -> None:
        assert run is not None  # registered only for a described run
        key_fd = config.getoption(OPT_KEY_FD)
        self._key = b""  # the trusted collection run (a manifest, no results) signs nothing that is read
        if key_fd is not None:  # every backend delivers the key on this fd, never in argv or the environment
            with os.fdopen(key_fd, "rb") as pipe:  # read once, then the fd is closed
                self._key = pipe.read()
        self._sink = open(run.results, "a", buffering=1) if run.results else None  # noqa: SIM115
        self._manifest = run.manifest
        self._forbidden = list(run.forbidden)
        self._package = run.package
        self._rules = AccountingRules.from_json(run.accounting)
        self._states: dict[str, TestState] = {}
        self._collect_errors: list[dict[str, str]] = []
        self._seq = 0
        self._dumps, self._hmac_new = json.dumps, hmac.new  # bound before student code loads

    def _emit(self, record: dict[str, Any]) -> None:
        if self._sink is None:
            return
        self._seq += 1
        record["seq"] = self._seq
        body = self._dumps(record, sort_keys=True)
        mac = self._hmac_new(self._key, body.encode(), hashlib.sha256).hexdigest()
        self._sink.write(self._dumps({"body": body, "mac": mac}) + "\n")
        self._sink.flush()

    def _state(self, nodeid: str) -> TestState:
        return self._states.setdefault(nodeid, TestState())

    state_of = _state

    # ---- collection -------------------------------------------------------------------------
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            error = {"nodeid": report.nodeid, "message": str(report.longrepr)[-MAX_OUTPUT_CHARS:]}
            self._collect_errors.append(error)
            self._emit({"kind": RecordKind.COLLECT_ERROR.value, **error})

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if isinstance(item, pytest.Function):
                item.obj = self._sentinel(item.nodeid, item.obj)

    def _sentinel(self, nodeid: str, fn: Any) -> Any:
        state = self._state(nodeid)

        @functools.wraps(fn)
        def run_body(*args: Any, **kwargs: Any) -> Any:
            state.entered = True
            result = fn(*args, **kwargs)
            state.completed = True
            return result

        return run_body

    def pytest_runtest_logstart(self, nodeid: str, location: tuple) -> None:
        self._emit({"kind": RecordKind.PROGRESS.value, "nodeid": nodeid})  # the grader's stall watchdog sees this

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        importer.leave_workdir(str(session.config.rootpath))
        if this_run.worker is not None:
            try:
                this_run.worker.ready()
            except Exception as exc:  # noqa: BLE001  each test will report the worker's failure
                this_run.worker.broken = str(exc)
        self._emit({"kind": RecordKind.PROGRESS.value, "nodeid": ""})
        if not self._manifest:
            return
        tests = [
            {
                "nodeid": item.nodeid,
                "file": item.nodeid.split("::", 1)[0],
                "points": points_of(item),
                "gpu": item.get_closest_marker("gpu") is not None or world_of(item)[1] == "nccl",
                "perf": item.get_closest_marker("perf") is not None,
                "world_size": world_of(item)[0],
            }
            for item in session.items
        ]
        with open(self._manifest, "w") as f:
            json.dump({"tests": tests, "errors": self._collect_errors}, f, indent=1)

    # ---- running ----------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.get_closest_marker("gpu") is not None and not has_cuda():
            self._state(item.nodeid).not_graded = GPU_SKIP_REASON
            pytest.skip(GPU_SKIP_REASON)
        world, backend = world_of(item)
        if backend == "nccl" and (gpus := cuda_device_count()) < world:
            reason = f"not graded here: needs {world} GPUs (this machine has {gpus})"
            self._state(item.nodeid).not_graded = reason
            pytest.skip(reason)

    def guards_of(self, item: pytest.Item) -> Guards:
        """What every worker of `item` enforces (the ranks of a multi-rank test too)."""
        return Guards(item.nodeid, tuple(self._forbidden), self._rules, self._required(item))

    def _required(self, item: pytest.Item) -> tuple[str, ...]:
        mark = item.get_closest_marker("kernels")
        return tuple(mark.args) if mark is not None else self._rules.require_kernels

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        state = self._state(item.nodeid)
        required = self._required(item)
        if this_run.worker is not None:
            this_run.worker.begin_test(item.nodeid, self._forbidden, self._rules.to_json(), list(required))
            if this_run.worker.picker is not None:
                this_run.worker.picker.reset()
        passed = False
        try:
            result = yield
            passed = True
            return result
        except BaseException as exc:
            state.call_raised = f"{type(exc).__name__}"
            if isinstance(exc, HeldForReview):  # the judge's own class: a worker's exception is a mirror, never this
                state.held = str(exc).strip() or "held for an instructor's review"
            state.failure = hidden_reason(exc) if this_run.redacted(item.nodeid) else failure_reason(exc)
            raise
        finally:
            state.violation = self._end_in_worker(state, required)
            if passed and not state.violation and required:
                state.violation = _audited(state)
            if state.violation and this_run.redacted(item.nodeid):  # its ledger's names are the worker's text
                state.violation = hidden_violation(state.violation)
            if state.violation:
                state.output.append(f"[accounting] {state.violation}")

    def _end_in_worker(self, state: TestState, required: tuple[str, ...]) -> str:
        """End the test in the worker; the accounting verdict from its ledger ("" when it passes)."""
        if this_run.worker is None:
            return ""
        try:
            served, data = this_run.worker.end_test()
        except Exception as exc:  # noqa: BLE001  the worker died at the end: no ledger
            served, data = True, None
            this_run.worker.broken = this_run.worker.broken or str(exc)
        if output := this_run.worker.take_output():
            state.output.append(f"[output of the submission's process]\n{output}")
        if this_run.worker.broken:
            state.output.append(f"[worker] {this_run.worker.broken}")
        if not (self._rules.active or required):
            return ""
        if not served:
            return verdict(Ledger(), self._rules, required)
        try:
            ledger = Ledger.from_json(data)
        except ValueError as exc:
            return f"the op and kernel accounting sent no valid ledger ({exc})"
        if self._rules.records_ops and ledger.ops.get(CALL_MARKER, 0) != this_run.worker.calls:
            return (f"the op accounting saw {ledger.ops.get(CALL_MARKER, 0)} of the {this_run.worker.calls} calls into the "
                    "submission (switched off or tampered with)")
        return verdict(ledger, self._rules, required, calls=this_run.worker.calls)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        state = self._state(report.nodeid)
        setattr(state, report.when, report.outcome)
        if report.failed or (report.skipped and report.when == "call"):
            state.output.append(f"[{report.when}] {report.longreprtext}")
        if report.when == "call" and report.capstdout:
            state.output.append(f"[stdout] {report.capstdout}")
        if report.when == "teardown":
            self._emit(record_of(report.nodeid, state, redact=this_run.redacted(report.nodeid)))

    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> None:
        if call.when == "call":
            self._state(item.nodeid).duration = call.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._emit({"kind": RecordKind.SESSION_END.value, "exitstatus": int(session.exitstatus)})


def _audited(state: TestState) -> str:
    """The guarded audit of the call the picker chose in this passed test ("" when it agrees, or when
    this is no kernel exercise or the test made no call with plain arguments)."""
    call = this_run.worker.picker.call if this_run.worker is not None and this_run.worker.picker is not None else None
    if this_run.guarded is None or call is None:
        return ""
    problem = this_run.guarded.replay(call)
    if problem and (output := this_run.guarded.output()):
        state.output.append(f"[output of the audit worker]\n{output}")
    return problem
