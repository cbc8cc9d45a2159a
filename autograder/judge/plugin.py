"""The judge: the pytest plugin that runs inside the sandbox (`-p autograder.judge.plugin`).

It registers the `points`, `gpu` and `perf` marks and the `perf` fixture, skips GPU tests where CUDA
is missing, and writes one signed JSON record per test. The student's package never loads in this
process: an import hook gives the test modules proxies, and a worker process (started here, fresh
after any test that crashed or hung it) runs the package, the forbidden-API patches and the op and
kernel accounting. The judge decides each test from its own assertions and the worker's ledger.

Nothing it writes is trusted blindly: the grader checks every record's HMAC (the key arrives on a
pipe before any student code is imported), matches records against its own list of expected tests,
and counts a pass only when pytest's report, this plugin's call wrapper and a sentinel wrapped
around the test function all agree that the body ran to completion.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

import pytest

from autograder import marks
from autograder.hardware import cuda_device_count, has_cuda
from autograder.judge import audit, importer
from autograder.judge.client import WorkerClient, hide_from_workers
from autograder.judge.feedback import failure_reason, hidden_reason, hidden_violation, is_hidden, parameter_id
from autograder.judge.perf import Perf
from autograder.judge.ranks import Guards, RankGroup, become_subreaper
from autograder.judge.verdict import MAX_OUTPUT_CHARS, TestState, record_of
from autograder.protocol.messages import HeldForReview, RecordKind
from autograder.protocol.rules import AccountingRules, Ledger, verdict
from autograder.protocol.run import OPT_KEY_FD, OPT_RUN, RunDescription
from autograder.worker.session import CALL_MARKER

PR_SET_DUMPABLE = 4
_client: WorkerClient | None = None
_run: RunDescription | None = None  # this run's description (protocol/run.py), read before any conftest
_audit: audit.GuardedAudit | None = None  # a kernel exercise's audit worker (judge/audit.py)


def client() -> WorkerClient:
    """The worker of this judge (tests reach the package only through it)."""
    if _client is None:
        raise RuntimeError("no worker: this run has no --ag-run description (the package is not graded here)")
    return _client


def client_if_started() -> WorkerClient | None:
    return _client


def _redacted(nodeid: str) -> bool:
    """Whether this test's messages and output stay out of its record: a hidden test's, unless the
    host grades the course's own reference (then an instructor reads why a hidden test failed)."""
    return is_hidden(nodeid) and not (_run is not None and _run.reveal_hidden)


def has_guarded_audit() -> bool:
    """Whether this run is a kernel exercise with an audit worker (where timed callables are made again)."""
    return _audit is not None


def guarded_timing(fn: Any) -> tuple[WorkerClient, Any] | None:
    """Where a kernel exercise times worker callable `fn`: (the audit worker, fn made again there),
    so that no repetition can run torch's compute ops unrecorded; None in any other exercise."""
    return _audit.timing_target(fn) if _audit is not None else None


def _no_dumps() -> None:
    """No process of our uid (the worker) may ptrace the judge or read its memory through /proc."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass

GPU_SKIP_REASON = "not graded here: needs a CUDA GPU"
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("autograder")
    group.addoption(OPT_RUN, default=None, help="this run's description, written by the host (protocol/run.py)")
    group.addoption(OPT_KEY_FD, type=int, default=None, help="read the HMAC key from this fd")


def pytest_configure(config: pytest.Config) -> None:
    marks.register(config)
    if _run is not None:
        _no_dumps()
        config.pluginmanager.register(_Recorder(config), "autograder-recorder")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Before any conftest loads: the import hook, and the worker starting (it imports torch while
    pytest collects)."""
    global _run
    path = getattr(early_config.known_args_namespace, "ag_run", None)
    _run = RunDescription.read(path) if path else None
    package, given = (_run.package, list(_run.given)) if _run is not None else ("", [])
    if package:
        global _client
        become_subreaper()  # whatever a rank leaves running becomes ours to kill (judge/ranks.py)
        _client = WorkerClient(package)
        importer.install(package, _client, given)
        hide_from_workers(list(_run.worker_hides))  # the run's tests and records, covered for every worker
        _start_audit(_run)  # its pristine copy of the package: before any worker runs
        _client.start()


def _start_audit(run: RunDescription) -> None:
    """A kernel exercise gets a guarded audit (judge/audit.py): the judge copies the package while no
    worker has run yet, into its own folder beside the results file (covered for every worker)."""
    global _audit
    rules = AccountingRules.from_json(run.accounting)
    if not rules.compute_in_kernels:
        return
    workdir = Path.cwd()
    binds = audit.pristine_copy([run.package, *run.given], workdir, Path(run.results).parent) if run.results else []
    _audit = audit.GuardedAudit(run.package, rules.allowed_ops, binds, audit.writable_folders(workdir))
    assert _client is not None
    _client.picker = audit.Picker()


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    return parameter_id(val)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _client is not None:
        _client.kill()
    if _audit is not None:
        _audit.close()


def world_of(item: pytest.Item) -> tuple[int, str]:
    """(world size, backend) of a multi-rank test; (1, "") for any other test."""
    mark = item.get_closest_marker("world_size")
    if mark is None:
        return 1, ""
    world = mark.args[0] if mark.args else mark.kwargs.get("n", 1)
    return int(world), str(mark.kwargs.get("backend", "gloo"))


@pytest.fixture
def ranks(request: pytest.FixtureRequest) -> Any:
    """A RankGroup of the test's `world_size` mark: `ranks.run(fn, *args)` -> each rank's result."""
    world, backend = world_of(request.node)
    if not backend:
        raise pytest.UsageError(f"{request.node.nodeid}: the ranks fixture needs @pytest.mark.world_size(n)")
    recorder = request.config.pluginmanager.get_plugin("autograder-recorder")
    guards = recorder.guards_of(request.node) if recorder else Guards(request.node.nodeid)
    timeout = float(request.config.getoption("timeout", None) or 120.0)
    main = client()
    group = RankGroup(package=main.package, world=world, backend=backend, timeout_s=timeout, guards=guards,
                      spare_pid=main.proc.pid if main.proc is not None else None)
    group.start()
    try:
        yield group
    finally:
        group.close()


@pytest.fixture
def perf(request: pytest.FixtureRequest) -> Perf:
    """Record perf metrics: `perf.record("name", value)`, graded against the spec's thresholds; attach
    figures: `perf.attach("name", fig)`, listed with the test's result."""
    recorder = request.config.pluginmanager.get_plugin("autograder-recorder")
    state = recorder.state_of(request.node.nodeid) if recorder else TestState()
    folder = _run.attachments if recorder and _run is not None else None
    return Perf(state.metrics, state.attachments, nodeid=request.node.nodeid, folder=Path(folder) if folder else None)


def points_of(item: pytest.Item) -> float:
    mark = item.get_closest_marker("points")
    if mark is None:
        return 1.0
    value = mark.args[0] if mark.args else mark.kwargs.get("n", 1)
    return float(value)


class _Recorder:
    def __init__(self, config: pytest.Config) -> None:
        run = _run
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
        if _client is not None:
            try:
                _client.ready()
            except Exception as exc:  # noqa: BLE001  each test will report the worker's failure
                _client.broken = str(exc)
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
        if _client is not None:
            _client.begin_test(item.nodeid, self._forbidden, self._rules.to_json(), list(required))
            if _client.picker is not None:
                _client.picker.reset()
        passed = False
        try:
            result = yield
            passed = True
            return result
        except BaseException as exc:
            state.call_raised = f"{type(exc).__name__}"
            if isinstance(exc, HeldForReview):  # the judge's own class: a worker's exception is a mirror, never this
                state.held = str(exc).strip() or "held for an instructor's review"
            state.failure = hidden_reason(exc) if _redacted(item.nodeid) else failure_reason(exc)
            raise
        finally:
            state.violation = self._end_in_worker(state, required)
            if passed and not state.violation and required:
                state.violation = _audited(state)
            if state.violation and _redacted(item.nodeid):  # its ledger's names are the worker's text
                state.violation = hidden_violation(state.violation)
            if state.violation:
                state.output.append(f"[accounting] {state.violation}")

    def _end_in_worker(self, state: TestState, required: tuple[str, ...]) -> str:
        """End the test in the worker; the accounting verdict from its ledger ("" when it passes)."""
        if _client is None:
            return ""
        try:
            served, data = _client.end_test()
        except Exception as exc:  # noqa: BLE001  the worker died at the end: no ledger
            served, data = True, None
            _client.broken = _client.broken or str(exc)
        if output := _client.take_output():
            state.output.append(f"[output of the submission's process]\n{output}")
        if _client.broken:
            state.output.append(f"[worker] {_client.broken}")
        if not (self._rules.active or required):
            return ""
        if not served:
            return verdict(Ledger(), self._rules, required)
        try:
            ledger = Ledger.from_json(data)
        except ValueError as exc:
            return f"the op and kernel accounting sent no valid ledger ({exc})"
        if self._rules.records_ops and ledger.ops.get(CALL_MARKER, 0) != _client.calls:
            return (f"the op accounting saw {ledger.ops.get(CALL_MARKER, 0)} of the {_client.calls} calls into the "
                    "submission (switched off or tampered with)")
        return verdict(ledger, self._rules, required, calls=_client.calls)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        state = self._state(report.nodeid)
        setattr(state, report.when, report.outcome)
        if report.failed or (report.skipped and report.when == "call"):
            state.output.append(f"[{report.when}] {report.longreprtext}")
        if report.when == "call" and report.capstdout:
            state.output.append(f"[stdout] {report.capstdout}")
        if report.when == "teardown":
            self._emit(record_of(report.nodeid, state, redact=_redacted(report.nodeid)))

    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> None:
        if call.when == "call":
            self._state(item.nodeid).duration = call.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._emit({"kind": RecordKind.SESSION_END.value, "exitstatus": int(session.exitstatus)})


def _audited(state: TestState) -> str:
    """The guarded audit of the call the picker chose in this passed test ("" when it agrees, or when
    this is no kernel exercise or the test made no call with plain arguments)."""
    call = _client.picker.call if _client is not None and _client.picker is not None else None
    if _audit is None or call is None:
        return ""
    problem = _audit.replay(call)
    if problem and (output := _audit.output()):
        state.output.append(f"[output of the audit worker]\n{output}")
    return problem
