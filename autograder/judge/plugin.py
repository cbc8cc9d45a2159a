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
import os
from pathlib import Path
from typing import Any

import pytest

from autograder import marks
from autograder.hardware import ENV_VAR as HARDWARE_ENV
from autograder.judge import audit, importer, this_run, time_limit
from autograder.judge.client import WorkerClient
from autograder.judge.feedback import parameter_id
from autograder.judge.perf import Perf
from autograder.judge.ranks import Guards, RankGroup
from autograder.judge.reaper import become_subreaper
from autograder.judge.recorder import Recorder, world_of
from autograder.judge.verdict import TestState
from autograder.judge.worker_process import hide_from_workers
from autograder.protocol.rules import AccountingRules
from autograder.protocol.run import OPT_KEY_FD, OPT_RUN, RunDescription

PR_SET_DUMPABLE = 4
def _no_dumps() -> None:
    """No process of our uid (the worker) may ptrace the judge or read its memory through /proc."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("autograder")
    group.addoption(OPT_RUN, default=None, help="this run's description, written by the host (protocol/run.py)")
    group.addoption(OPT_KEY_FD, type=int, default=None, help="read the HMAC key from this fd")


def pytest_configure(config: pytest.Config) -> None:
    marks.register(config)
    config.pluginmanager.register(time_limit, "autograder-time-limit")  # each test's limit in its own time
    if this_run.description is not None:
        _no_dumps()
        config.pluginmanager.register(Recorder(config, this_run.description), "autograder-recorder")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Before any conftest loads: the import hook, and the worker starting (it imports torch while
    pytest collects)."""
    path = getattr(early_config.known_args_namespace, "ag_run", None)
    this_run.description = RunDescription.read(path) if path else None
    package, given = (this_run.description.package, list(this_run.description.given)) if this_run.description is not None else ("", [])
    if package:
        become_subreaper()  # whatever a rank leaves running becomes ours to kill (judge/ranks.py)
        this_run.worker = WorkerClient(package)
        if os.environ.get(HARDWARE_ENV) == "cpu":  # a worker lost to a crash or a hang restarts as a fork
            this_run.worker.restart_server = this_run.fork_server
        importer.install(package, this_run.worker, given)
        hide_from_workers(list(this_run.description.worker_hides))  # the run's tests and records, covered for every worker
        _start_audit(this_run.description)  # its pristine copy of the package: before any worker runs
        this_run.worker.start()


def _start_audit(run: RunDescription) -> None:
    """A kernel exercise gets a guarded audit (judge/audit.py): the judge copies the package while no
    worker has run yet, into its own folder beside the results file (covered for every worker)."""
    rules = AccountingRules.from_json(run.accounting)
    if not rules.compute_in_kernels:
        return
    workdir = Path.cwd()
    binds = audit.pristine_copy([run.package, *run.given], workdir, Path(run.results).parent) if run.results else []
    this_run.guarded = audit.GuardedAudit(run.package, rules.allowed_ops, binds, audit.writable_folders(workdir))
    assert this_run.worker is not None
    this_run.worker.picker = audit.Picker()


def pytest_collection_finish(session: pytest.Session) -> None:
    """A run with CPU multi-rank tests starts its fork server now: it imports torch while the
    test's own worker starts, not when the first multi-rank test waits for it."""
    if this_run.description is not None and any(world_of(item)[1] == "gloo" for item in session.items):
        this_run.fork_server().start()


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    return parameter_id(val)


def pytest_unconfigure(config: pytest.Config) -> None:
    if this_run.worker is not None:
        this_run.worker.kill()
    if this_run.guarded is not None:
        this_run.guarded.close()
    if this_run.forkserver is not None:
        this_run.forkserver.close()


@pytest.fixture
def ranks(request: pytest.FixtureRequest) -> Any:
    """A RankGroup of the test's `world_size` mark: `ranks.run(fn, *args)` -> each rank's result."""
    world, backend = world_of(request.node)
    if not backend:
        raise pytest.UsageError(f"{request.node.nodeid}: the ranks fixture needs @pytest.mark.world_size(n)")
    recorder = request.config.pluginmanager.get_plugin("autograder-recorder")
    guards = recorder.guards_of(request.node) if recorder else Guards(request.node.nodeid)
    timeout = float(request.config.getoption("timeout", None) or 120.0)
    main = this_run.client()
    group = RankGroup(package=main.package, world=world, backend=backend, timeout_s=timeout, guards=guards,
                      spare_pid=main.proc.pid if main.proc is not None else None, forkserver=this_run.fork_server())
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
    test = recorder.state_of(request.node.nodeid) if recorder else TestState()
    folder = this_run.description.attachments if recorder and this_run.description is not None else None
    return Perf(test.metrics, test.attachments, nodeid=request.node.nodeid, folder=Path(folder) if folder else None)
