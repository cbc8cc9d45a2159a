"""The worker process: imports the student's package and runs what the judge asks, nothing else.

Started by the judge (`python -m autograder.worker.server ...`) with a socket and two arena files
on inherited descriptors. It answers requests one at a time (each with REPLY or RAISED); while it
runs one, it may ask the judge to run a judge function it was handed (CALLBACK), and serves any
request that arrives meanwhile, so calls can nest both ways.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from autograder.protocol import requests
from autograder.protocol.arena import Arena
from autograder.protocol.messages import CALL_REQUESTS, ENV_ROLE, ROLE_WORKER, Op
from autograder.protocol.rules import AccountingRules
from autograder.protocol.wire import ProtocolError, recv_frame, send_frame
from autograder.worker import accounting, forbid, guard, ranks, toggles, trust
from autograder.worker.blame import describe
from autograder.worker.refs import ObjectTable, WorkerCodec
from autograder.worker.session import TestSession

SPECIALS = {"len", "getitem", "setitem", "delitem", "contains", "iter", "bool", "repr", "str", "next"}
MAX_ITER_ITEMS = 1_000_000
PR_SET_PDEATHSIG = 1


class JudgeRaised(Exception):
    """A judge function called back from the worker raised (its type and message are kept)."""


class Worker:
    def __init__(self, sock: socket.socket, to_judge: Arena, from_judge: Arena, generation: int, package: str) -> None:
        self.sock, self.generation, self.package = sock, generation, package
        self.table = ObjectTable()
        self.codec = WorkerCodec(to_judge, from_judge, self.table, generation, package, self._call_back)
        self.session: TestSession | None = None
        self.depth = 0
        self.guard: guard.Guard | None = None  # an audit worker's: armed before its first call

    # ---- the loop -----------------------------------------------------------------------------
    def serve(self, restore: Callable[[], list[str]] = trust.restore) -> None:
        """`restore`, bound when this loop starts (a running frame cannot be rebound), puts back
        whatever of the grader's worker-side code the package replaced before each request is
        handled; the test's ledger names it (autograder/worker/trust.py)."""
        while True:
            try:
                message = self._receive()
            except (ConnectionError, ProtocolError):
                raise
            except BaseException as exc:  # noqa: BLE001  resolving a name imported the package, which failed
                self._send((Op.RAISED.value, describe(exc)))
                continue
            self._note_replaced(restore())
            self._handle(message)

    def _note_replaced(self, names: list[str]) -> None:
        acct = self.session.accountant if self.session is not None else None
        for name in names:
            if acct is not None:
                acct.ledger.problems.append(f"the submission replaced the grader's {name} (tampering)")

    def _receive(self) -> tuple:
        tree, arena_size = recv_frame(self.sock)
        if self.depth == 0 and self.session is not None and _op_of(tree) in CALL_REQUESTS:
            self.session.mark_call()  # before decoding: a request whose names fail to resolve still counts
        self.codec.begin_receive(arena_size)
        # the judge's tensors rebuilt out of the arena (no student code runs) are not the submission's ops;
        # pausing restarts the profiler, so only a message that carries tensor bytes pays for it
        with self._grader_work() if arena_size else contextlib.nullcontext():
            message = self.codec.decode(tree)
        if type(message) is not tuple or not message or type(message[0]) is not str:
            raise ProtocolError("malformed message from the judge")
        return message

    def _send(self, message: tuple) -> None:
        self.codec.begin_send()
        tree = self.codec.encode(message)
        send_frame(self.sock, tree, self.codec.outgoing.offset)

    def _grader_work(self) -> Any:
        """The grader's own work inside a test (decoding the judge's values, syncing the RNG), left
        out of the op accounting. Never around the submission's code: encoding a result can run it.
        Only between calls (depth 0): inside a call (a callback's reply) the submission's frames are
        on the stack, and the accounting refuses a pause from under them, as it must."""
        acct = self.session.accountant if self.session is not None and self.depth == 0 else None
        return acct.paused() if acct is not None else contextlib.nullcontext()

    def _handle(self, message: tuple) -> None:
        op, releases, rng, *args = message
        for rid, receipts in releases:
            self.table.release(rid, receipts)
        if rng is not None:  # the judge reseeded its global RNG: draw from the same stream here
            import torch

            with self._grader_work():
                torch.random.set_rng_state(rng)
        received = [(t, t._version) for t in self.codec.received]
        generators = list(self.codec.received_generators)
        if self.guard is not None and op in (Op.CALL.value, Op.MEASURE.value):  # a call, or timing one
            self.guard.arm()
        try:
            result = self._dispatch(Op(op), args)
        except BaseException as exc:  # noqa: BLE001  everything the submission raises goes back
            self._send((Op.RAISED.value, describe(exc)))
            return
        changed: list = [[i, t.detach()] for i, (t, version) in enumerate(received) if t._version != version]
        changed += [["g", i, g.get_state()] for i, g in enumerate(generators)]
        try:
            import torch

            with self._grader_work():  # the grader's own tensors, not the submission's ops
                state = torch.random.get_rng_state() if rng is not None else None
            self._send((Op.REPLY.value, result, changed, state))
        except (ConnectionError, ProtocolError):
            raise
        except BaseException as exc:  # noqa: BLE001  a result that cannot be sent is an error of this call
            self._send((Op.RAISED.value, describe(exc)))

    def _dispatch(self, op: Op, args: list) -> Any:
        self.depth += 1
        try:
            return self._run(requests.parse(op, args))
        finally:
            self.depth -= 1

    def _run(self, request: requests.Request) -> Any:
        match request:
            case requests.Hello():
                return (os.getpid(), self.generation)
            case requests.BeginTest(nodeid, forbidden, rules, required):
                return self._begin(nodeid, forbidden, rules, required)
            case requests.EndTest():
                session, self.session = self.session, None
                return session.end() if session is not None else None
            case requests.GetAttr(target, name):
                value = getattr(target, name)
                if isinstance(target, type(sys)):
                    self.codec.path = f"{target.__name__}.{name}"
                return value
            case requests.SetAttr(target, name, value):
                return setattr(target, name, value)
            case requests.DelAttr(target, name):
                return delattr(target, name)
            case requests.Call(target, call_args, kwargs):
                return target(*call_args, **kwargs)
            case requests.CallMethod(target, name, call_args, kwargs):
                return getattr(target, name)(*call_args, **kwargs)
            case requests.Special(target, name, args):
                return self._special(target, name, args)
            case requests.Shipped():
                return self._shipped(*request.fields())
            case requests.Measure(target, phase, options):
                return self._measure(target, phase, options)
        raise ProtocolError(f"unknown request {request.op}")

    def _begin(self, nodeid: str, forbidden: list, rules: dict, required: list) -> None:
        if self.session is not None:
            self.session.end()
        self.session = TestSession(nodeid, list(forbidden), AccountingRules.from_json(rules), tuple(required),
                                   self.package)
        self.session.begin()

    @staticmethod
    def _special(target: Any, name: str, args: list) -> Any:
        if name not in SPECIALS:
            raise ProtocolError(f"unknown special method {name!r}")
        if name == "iter":
            items = []
            for item in target:
                items.append(item)
                if len(items) > MAX_ITER_ITEMS:
                    raise RuntimeError(f"iteration produced over {MAX_ITER_ITEMS} items")
            return items
        if name == "bool":
            return bool(target)
        if name in ("repr", "str"):
            return (repr if name == "repr" else str)(target)
        if name == "len":
            return len(target)
        if name == "next":
            return next(target)
        return getattr(target, f"__{name}__")(*args)

    @staticmethod
    def _shipped(path: str, module_name: str, qualname: str, args: tuple, kwargs: dict,
                 source: str | None = None) -> Any:
        """Run a test-side function the judge ships (marked with `in_worker`) here; `source` is the
        module's text, sent with the first call of this worker (its view covers the test folders)."""
        # the worker's own registry of the test modules it loaded, never `sys.modules` (where the package
        # may plant one), and the function checked to be the test file's own (autograder/worker/trust.py)
        module = trust.test_module(module_name, path, lambda: _load_test_module(module_name, path, source))
        return trust.trusted_function(module, qualname)(*args, **kwargs)

    def _measure(self, target: Any, phase: str, options: dict) -> Any:
        if self.session is None and getattr(self, "_untested", None) is None:  # outside a test: one kept for all phases
            self._untested = TestSession("", [], AccountingRules(), (), self.package)
        session = self.session or self._untested
        device = options.get("device")
        if phase == "warmup":
            first = options.get("first")
            return session.warmup(target, int(options["warmup"]), bool(options.get("flush_l2", True)), device,
                                  bool(options.get("prime", False)), bool(options.get("cuda_graph", False)),
                                  None if first is None else tuple(first), int(options.get("reps", 0)))
        if phase == "calibrate":  # a round trip carrying payloads shaped as the timed request's: the judge times it
            return options.get("echo")
        if phase == "timed":
            return session.timed(target, int(options["reps"]), bool(options["flush_l2"]), device,
                                 bool(options.get("cuda_graph", False)), options.get("sets"))
        if phase == "outputs":  # the kept outputs of the repetitions the judge chose after the timed phase
            return session.outputs(target, options.get("reps"))
        if phase == "replayed":
            return session.replayed(target, device)
        if phase == "audit":  # on the warm-up's bound buffers, or on `args` (the timing ran in the audit worker)
            args = options.get("args")
            return session.audit(session.bound(target) if args is None else lambda: target(*args), device)
        raise ProtocolError(f"unknown measure phase {phase!r}")

    # ---- calls back into the judge ------------------------------------------------------------
    def _call_back(self, cid: int, args: tuple, kwargs: dict) -> Any:
        self._send((Op.CALLBACK.value, cid, args, kwargs))
        while True:
            message = self._receive()
            if message[0] == Op.REPLY.value and len(message) >= 2:
                return message[1]
            if message[0] == Op.RAISED.value:
                info = message[1]
                raise JudgeRaised(f"{info.get('type', '?')}: {info.get('message', '')}")
            self._handle(message)


def _op_of(tree: Any) -> Any:
    """The request kind of a raw message tree ("T", [op, ...]), or None."""
    if type(tree) is tuple and len(tree) == 2 and type(tree[1]) is list and tree[1]:
        return tree[1][0]
    return None


def _load_test_module(module_name: str, path: str, source: str | None = None) -> Any:
    """Import a test module as its own trusted code: forbidden APIs lifted and nothing accounted
    (its module level binds names such as SDPBackend and may run torch ops of its own). Built from
    `source` when the judge sent it, else read from `path` (a sandbox without a worker view)."""
    acct = accounting.current()
    with forbid.lifted(), (acct.paused() if acct is not None else contextlib.nullcontext()):
        return trust.load_trusted(module_name, path, source)  # its code objects registered as trusted


def _load_conftest() -> None:
    """The master conftest first, as pytest loads it in the judge: it may set the environment
    (TRITON_INTERPRET) before the package imports. A failure here is left to each request to show."""
    if os.path.isfile("conftest.py"):
        sys.path.insert(0, os.getcwd())
        try:
            conftest = trust.test_module("conftest", "conftest.py", lambda: _load_test_module("conftest", "conftest.py"))
            trust.pin_module("conftest", conftest)  # `from conftest import ...` in a test module gets this one
        except Exception:  # noqa: BLE001, S110  the package may not import; its tests will say so
            pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the worker process of a graded test run")
    for name in ("--sock-fd", "--to-judge-fd", "--from-judge-fd", "--generation"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--package", required=True)
    parser.add_argument("--guard", default=None, help="an audit worker: refuse every torch op off this allowlist (JSON)")
    opts = parser.parse_args(argv)
    os.environ[ENV_ROLE] = ROLE_WORKER
    try:  # die with the judge (a hung judge is killed by the trusted side; its worker goes with it)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    refuser = guard.Guard(tuple(json.loads(opts.guard))) if opts.guard is not None else None  # before the package
    trust.pin(opts.package)  # before the package imports: what the grader trusts, by identity (trust.py)
    toggles.guard(opts.package)  # the profiler's private switches are the grader's (toggles.py)
    ranks.join_from_env()  # a rank of a multi-rank test: watch the collectives, join the group
    _load_conftest()  # imports torch and the package when the tests do (the judge waits for HELLO)

    sock = socket.socket(fileno=opts.sock_fd)
    worker = Worker(sock, Arena(opts.to_judge_fd), Arena(opts.from_judge_fd), opts.generation, opts.package)
    worker.guard = refuser
    try:
        worker.serve()
    except (ConnectionError, ProtocolError):
        os._exit(0)


if __name__ == "__main__":
    main()
