"""The judge's end of the worker protocol: requests sent, replies turned into judge values.

One worker per judge process, started in the background when the judge starts and again after a
test that crashed, hung or interrupted it (the generation counts restarts; references into an
earlier worker are refused, names of the package re-resolve). The process itself (launch, output,
kill) is judge/worker_process.py's; what a reply brings back besides its value, judge/replies.py's.
"""

from __future__ import annotations

import socket
import sys
import weakref
from collections.abc import Callable
from typing import Any

from autograder.judge.codec import JudgeCodec
from autograder.judge.replies import WorkerDied, remote_exception, write_back
from autograder.judge.worker_process import WorkerProcess
from autograder.protocol import requests
from autograder.protocol.arena import Arena
from autograder.protocol.messages import CALL_REQUESTS, Op
from autograder.protocol.wire import PeerGone, ProtocolError, expect, recv_frame, send_frame

START_TIMEOUT_S = 180.0   # a fresh interpreter importing torch on a loaded 2-core machine


class WorkerClient(WorkerProcess):
    def __init__(self, package: str, env: dict[str, str] | None = None) -> None:
        super().__init__(package, env)
        self.share_rng = True               # send the judge's reseeded global RNG along (not to ranks)
        self.codec: JudgeCodec | None = None
        self.releases: list[tuple[int, int]] = []
        self.callbacks: dict[int, Callable[..., Any]] = {}
        self.callback_error: BaseException | None = None
        self.test: tuple | None = None      # BEGIN_TEST arguments of the test now running
        self.test_begun = False
        self.calls = 0                      # top-level calls in this test (the ledger must show them)
        self.depth = 0                      # requests sent and not yet answered
        self._rng: Any = None               # the global RNG state the worker last reported
        self.greeted = False
        self.shipped_sources: set[str] = set()  # test modules whose text this worker was sent
        self.picker: Any = None                 # chooses one call of each test to audit (judge/audit.py)

    def _connected(self, sock: socket.socket, to_judge: int, from_judge: int) -> None:
        self._rng = None
        self.greeted = False
        self.shipped_sources = set()  # a fresh worker has been sent no test module's source
        self.codec = JudgeCodec(self, Arena(from_judge), Arena(to_judge))
        self.releases = []

    def kill(self, reason: str = "") -> None:
        super().kill(reason)
        self.test_begun = False

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
        requests.parse(op, args)  # a request built wrong fails here, in the grader, before anything is sent
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
                write_back(sent, message[2])
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

    def register_callback(self, fn: Callable[..., Any]) -> int:
        cid = len(self.callbacks) + 1
        self.callbacks[cid] = fn
        return cid

    def release_later(self, generation: int, rid: int, cell: list[int]) -> None:
        if generation == self.generation:
            self.releases.append((rid, cell[0]))

    def track(self, proxy: Any, generation: int, rid: int, cell: list[int]) -> None:
        weakref.finalize(proxy, self.release_later, generation, rid, cell)
