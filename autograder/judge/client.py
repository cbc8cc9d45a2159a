"""The judge's end of the worker: starts it, sends requests, turns replies into judge values.

One worker per judge process, started in the background when the judge starts and again after a
test that crashed, hung or interrupted it (the generation counts restarts; references into an
earlier worker are refused, names of the package re-resolve). The worker is a fresh interpreter
(never a fork of the judge: it must not hold the key), in its own session, with only its socket and
arenas inherited; its output goes to a pipe the judge drains into the test's report.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from autograder.judge import worker_view
from autograder.judge.codec import JudgeCodec
from autograder.judge.proxies import RemoteError, mirror_exception
from autograder.protocol.arena import Arena, new_arena_fd
from autograder.protocol.messages import CALL_REQUESTS, ENV_ROLE, ROLE_WORKER, Op
from autograder.protocol.wire import PeerGone, ProtocolError, expect, recv_frame, send_frame

START_TIMEOUT_S = 180.0   # a fresh interpreter importing torch on a loaded 2-core machine
MAX_OUTPUT_CHARS = 20_000
_hidden_from_workers: list[str] = []  # what every worker's mount view covers (set once by the plugin)


def hide_from_workers(paths: list[str]) -> None:
    """Cover `paths` (the run's test folders, the judge's own files) in every worker started after."""
    _hidden_from_workers[:] = paths


class WorkerDied(RuntimeError):
    """The submission's process ended or broke the protocol during a request."""


class WorkerClient:
    def __init__(self, package: str, env: dict[str, str] | None = None) -> None:
        self.package = package
        self.env = dict(env or {})          # what this worker's environment adds (a rank's coordinates)
        self.share_rng = True               # send the judge's reseeded global RNG along (not to ranks)
        self.generation = 0
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.codec: JudgeCodec | None = None
        self.releases: list[tuple[int, int]] = []
        self.callbacks: dict[int, Callable[..., Any]] = {}
        self.callback_error: BaseException | None = None
        self.test: tuple | None = None      # BEGIN_TEST arguments of the test now running
        self.test_begun = False
        self.calls = 0                      # top-level calls in this test (the ledger must show them)
        self.depth = 0                      # requests sent and not yet answered
        self.broken = ""                    # why the current test's worker was lost, if it was
        self._rng: Any = None               # the global RNG state the worker last reported
        self.greeted = False
        self.shipped_sources: set[str] = set()  # test modules whose text this worker was sent
        self.guard: tuple[str, ...] | None = None  # an audit worker: the ops it allows (judge/audit.py)
        self.view: dict[str, list] = {}         # its extra mount view: "binds", "fresh" (judge/worker_view.py)
        self.picker: Any = None                 # chooses one call of each test to audit (judge/audit.py)
        self._output: list[str] = []
        self._output_lock = threading.Lock()

    # ---- process ------------------------------------------------------------------------------
    def start(self) -> None:
        self.generation += 1
        self._rng = None
        self.greeted = False
        judge_end, worker_end = socket.socketpair()
        to_judge, from_judge = new_arena_fd("autograder-to-judge"), new_arena_fd("autograder-to-worker")
        fds = (worker_end.fileno(), to_judge, from_judge)
        argv = [sys.executable, "-m", "autograder.worker.server", "--sock-fd", str(fds[0]), "--to-judge-fd",
                str(to_judge), "--from-judge-fd", str(from_judge), "--generation", str(self.generation),
                "--package", self.package]
        if self.guard is not None:
            argv += ["--guard", json.dumps(list(self.guard))]
        argv = worker_view.launch_argv(sys.executable, list(_hidden_from_workers), argv,  # tests, records covered
                                       self.view.get("binds", []), self.view.get("fresh", []))
        self.shipped_sources = set()  # a fresh worker has been sent no test module's source
        env = {"OMP_WAIT_POLICY": "PASSIVE"} | dict(os.environ) | self.env | {ENV_ROLE: ROLE_WORKER}  # see grade._base_env
        self.proc = subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True, env=env)
        worker_end.close()
        self.sock = judge_end
        self.codec = JudgeCodec(self, Arena(from_judge), Arena(to_judge))
        self._arena_fds = (to_judge, from_judge)  # the judge grows its arena through its fd: kept open
        threading.Thread(target=self._drain, args=(self.proc.stdout,), daemon=True).start()
        self.releases = []

    def _drain(self, stream: Any) -> None:
        for line in iter(stream.readline, b""):
            with self._output_lock:
                self._output.append(line.decode(errors="replace"))
                if sum(map(len, self._output)) > MAX_OUTPUT_CHARS:
                    del self._output[: len(self._output) // 2]

    def take_output(self) -> str:
        with self._output_lock:
            text, self._output = "".join(self._output), []
        return text

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, reason: str = "") -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
        if self.sock is not None:
            self.sock.close()
        for fd in getattr(self, "_arena_fds", ()):
            try:
                os.close(fd)
            except OSError:
                pass
        self._arena_fds = ()
        self.proc = self.sock = None
        self.test_begun = False
        if reason:
            self.broken = reason

    def ready(self) -> None:
        """Wait until the worker answers (it imports torch and the conftest first): called before the
        first test so that start-up never counts against a test's timeout."""
        self._ensure()

    def _ensure(self) -> None:
        if not self.alive():
            if self.proc is not None:
                self.kill()
            self.start()
        if not self.greeted:
            assert self.sock is not None
            self.sock.settimeout(START_TIMEOUT_S)
            try:
                self._exchange((Op.HELLO.value, []))
                self.greeted = True
            except TimeoutError as exc:
                self.kill()
                raise WorkerDied(f"the worker process did not start within {START_TIMEOUT_S:.0f} s") from exc
            finally:
                if self.sock is not None:
                    self.sock.settimeout(None)
        if self.test is not None and not self.test_begun:
            self.test_begun = True
            self._exchange((Op.BEGIN_TEST.value, [], *self.test))

    # ---- tests --------------------------------------------------------------------------------
    def begin_test(self, nodeid: str, forbidden: list[str], rules: dict, required: list[str]) -> None:
        self.test = (nodeid, forbidden, rules, required)
        self.test_begun = False
        self.calls = 0
        self.broken = ""
        self.callbacks.clear()
        self.callback_error = None

    def end_test(self) -> tuple[bool, Any]:
        """(whether the worker served this test, its ledger or None); the worker stays for the next."""
        begun, self.test = self.test_begun, None
        self.callbacks.clear()
        if not begun or not self.alive():
            return begun, None
        ledger = self._exchange((Op.END_TEST.value, []))
        self.test_begun = False
        return True, ledger

    # ---- requests -----------------------------------------------------------------------------
    def request(self, op: Op, *args: Any) -> Any:
        self._ensure()
        if op is Op.SHIPPED:  # (path, module, qualname, args, kwargs): the worker cannot read the path itself
            args = (*args, self._source_once(args[0]))
        picked = self.picker.before(op, args) if self.picker is not None and self.depth == 0 else None
        value = self._exchange((op.value, self._take_releases(), self._rng_to_send(), *args))
        if picked is not None:
            self.picker.after(picked, value)
        return value

    def _source_once(self, path: Any) -> str | None:
        """The text of the test module at `path` the first time this worker needs it (its view covers
        the test folders), None after: the worker keeps the module it built. Only the run of that
        file sends it, so a hidden file's text reaches only a hidden run's worker."""
        if type(path) is not str or path in self.shipped_sources:
            return None
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        except OSError:
            return None
        self.shipped_sources.add(path)
        return source

    def _rng_to_send(self) -> Any:
        """The judge's global CPU RNG state when a test reseeded it since the worker last had it
        (`torch.manual_seed(8); generate(...)` then draws what it would in one process)."""
        torch = sys.modules.get("torch")
        if torch is None or not self.share_rng:  # no RNG stream to share here, or a rank with its own
            return None
        state = torch.random.get_rng_state()
        if self._rng is not None and torch.equal(state, self._rng):
            return None
        return state

    def _take_releases(self) -> list:
        releases, self.releases = self.releases, []
        return releases

    def _exchange(self, message: tuple) -> Any:
        if message[0] in (Op.HELLO.value, Op.BEGIN_TEST.value, Op.END_TEST.value):
            message = (message[0], self._take_releases(), None, *message[2:]) if message[0] != Op.HELLO.value \
                else (message[0], [], None)
        tree, sent = self._encode(message)  # a value that cannot cross fails here, nothing sent
        if message[0] in CALL_REQUESTS and self.depth == 0:  # the worker marks exactly these in its ledger
            self.calls += 1
        self.depth += 1  # requests sent and not yet answered (calls back nest inside)
        try:
            try:
                self._send_tree(tree)
                outcome, value = self._await_reply(sent, rng_sent=len(message) > 2 and message[2] is not None)
            except (PeerGone, ProtocolError, OSError) as exc:
                status = self._exit_status()
                self.kill(f"the submission's process {status} ({exc})")
                raise WorkerDied(self.broken) from None
            except BaseException:  # a timeout or interrupt in the middle of a request: the worker is mid-call
                self.kill("the request to the submission's process was interrupted (timeout?)")
                raise
        finally:
            self.depth -= 1
        if self.callback_error is not None:  # a judge function the submission called failed: that counts
            error, self.callback_error = self.callback_error, None
            raise error
        if outcome == Op.RAISED.value:
            raise value
        return value

    def _exit_status(self) -> str:
        if self.proc is None:
            return "is gone"
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "broke the protocol"
        if code >= 0:
            return f"exited with status {code}"
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = {"SIGSEGV": " (segmentation fault)", "SIGKILL": " (killed: out of memory?)"}.get(name, "")
        return f"was killed by {name}{hint}"

    def _encode(self, message: tuple) -> tuple[Any, list]:
        assert self.codec is not None
        self.codec.begin_send()
        tree = self.codec.encode(message)
        return tree, [list(self.codec.sent), list(self.codec.sent_generators)]

    def _send_tree(self, tree: Any) -> None:
        assert self.codec is not None and self.sock is not None
        send_frame(self.sock, tree, self.codec.outgoing.offset)

    def _send(self, message: tuple) -> None:
        self._send_tree(self._encode(message)[0])

    def _await_reply(self, sent: list, rng_sent: bool = False) -> tuple[str, Any]:
        """(REPLY, value) or (RAISED, the judge's exception for it), serving callbacks meanwhile. The
        RNG state a reply carries is adopted only for a request that sent the judge's (`rng_sent`):
        otherwise the submission would set the judge's stream for every draw after its call."""
        assert self.codec is not None and self.sock is not None
        while True:
            tree, arena_size = recv_frame(self.sock)
            self.codec.begin_receive(arena_size)
            message = self.codec.decode(tree)
            if type(message) is not tuple or not message:
                raise ProtocolError("malformed reply")
            kind = message[0]
            if kind == Op.REPLY.value and len(message) == 4:
                self._write_back(sent, message[2])
                if rng_sent:
                    self._take_rng(message[3])
                return kind, message[1]
            if kind == Op.RAISED.value and len(message) == 2:
                return kind, remote_exception(message[1])
            if kind == Op.CALLBACK.value and len(message) == 4:
                self._serve_callback(*message[1:])
                continue
            raise ProtocolError(f"unexpected message {kind!r} from the worker")

    def _take_rng(self, state: Any) -> None:
        import torch

        if isinstance(state, torch.Tensor) and state.dtype == torch.uint8:
            torch.random.set_rng_state(state)
            self._rng = state

    def _serve_callback(self, cid: Any, args: Any, kwargs: Any) -> None:
        fn = self.callbacks.get(expect(cid, int, "callback id"))
        try:
            if fn is None:
                raise ProtocolError(f"no judge function {cid}")
            result = fn(*expect(args, tuple, "arguments"), **expect(kwargs, dict, "keywords"))
            reply: tuple = (Op.REPLY.value, result, [], None)
        except BaseException as exc:  # noqa: BLE001  re-raised in the judge after the outer request
            if self.callback_error is None:
                self.callback_error = exc
            reply = (Op.RAISED.value, {"type": type(exc).__name__, "message": str(exc)[:2000]})
        self._send(reply)

    @staticmethod
    def _write_back(sent: list, changed: Any) -> None:
        """Arguments the submission changed in place: their final values, into the judge's tensors
        (and the final state of each generator it was handed, as if it had drawn from ours)."""
        import torch

        tensors, generators = sent
        for entry in expect(changed, list, "changed arguments"):
            if type(entry) is list and len(entry) == 3 and entry[0] == "g":
                index, state = expect(entry[1], int, "generator index"), entry[2]
                if not 0 <= index < len(generators) or not isinstance(state, torch.Tensor):
                    raise ProtocolError("a generator state that does not match an argument")
                generators[index].set_state(state)
                continue
            index, value = entry
            target = tensors[expect(index, int, "argument index")] if 0 <= index < len(tensors) else None
            if not isinstance(target, torch.Tensor) or not isinstance(value, torch.Tensor) or \
                    value.shape != target.shape or value.dtype != target.dtype:
                raise ProtocolError("an in-place change to an argument that does not match it")
            with torch.no_grad():
                target.copy_(value.to(target.device))

    def register_callback(self, fn: Callable[..., Any]) -> int:
        cid = len(self.callbacks) + 1
        self.callbacks[cid] = fn
        return cid

    def release_later(self, generation: int, rid: int, cell: list[int]) -> None:
        if generation == self.generation:
            self.releases.append((rid, cell[0]))

    def track(self, proxy: Any, generation: int, rid: int, cell: list[int]) -> None:
        weakref.finalize(proxy, self.release_later, generation, rid, cell)


SUBMISSION_LINE = "in your code: "


def remote_exception(info: Any) -> BaseException:
    """The judge's exception for what the worker raised (never a pytest outcome or an interrupt)."""
    if type(info) is not dict:
        return WorkerDied("the worker sent a malformed error")
    name = str(info.get("type", "Exception"))
    bases = [b for b in info.get("bases", []) if type(b) is str] if type(info.get("bases")) is list else []
    cls = mirror_exception(str(info.get("module", "?")), name, bases)
    message = str(info.get("message", ""))
    try:
        exc = cls(message)
    except Exception:  # noqa: BLE001  a builtin whose constructor wants more (UnicodeDecodeError)
        exc = mirror_exception(str(info.get("module", "?")), name, [])(message)
    tb = str(info.get("traceback", ""))
    if isinstance(exc, RemoteError):
        exc.remote_traceback = tb
    where = str(info.get("where", ""))[:500]
    if where:  # the student's line: what the test's reason shows (autograder.judge.plugin)
        exc.add_note(f"{SUBMISSION_LINE}{where}")
    if tb:
        exc.add_note(f"raised in the submission's process:\n{tb}")
    return exc
