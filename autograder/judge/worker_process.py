"""The worker as a process: launched, its output drained, killed. The protocol spoken over its
socket and arenas is judge/client.py's (WorkerClient extends this class).

The worker is a fresh interpreter (never a fork of the judge: it must not hold the key), in its own
session, under its own mount view (judge/worker_view.py: the run's tests and records covered), with
only its socket and two arenas inherited; its output goes to a pipe the judge drains into the
test's report (the last MAX_OUTPUT_CHARS of it).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from autograder.judge import own_time, worker_view
from autograder.judge.forkserver import ForkedProcess, ForkServer
from autograder.protocol.arena import new_arena_fd
from autograder.protocol.messages import ENV_ROLE, ROLE_WORKER

MAX_OUTPUT_CHARS = 20_000
_hidden_from_workers: list[str] = []  # what every worker's mount view covers (set once by the plugin)


def hide_from_workers(paths: list[str]) -> None:
    """Cover `paths` (the run's test folders, the judge's own files) in every worker started after."""
    _hidden_from_workers[:] = paths


class WorkerProcess:
    def __init__(self, package: str, env: dict[str, str] | None = None) -> None:
        self.package = package
        self.env = dict(env or {})          # what this worker's environment adds (a rank's coordinates)
        self.generation = 0                 # counts starts: references into an earlier worker are refused
        self.proc: subprocess.Popen | ForkedProcess | None = None
        self.sock: socket.socket | None = None
        self.guard: tuple[str, ...] | None = None  # an audit worker: the ops it allows (judge/audit.py)
        self.view: dict[str, list] = {}     # its extra mount view: "binds", "fresh" (judge/worker_view.py)
        self.forkserver: ForkServer | None = None  # forks it from a zygote (a rank's worker) where set
        self.restart_server: Callable[[], ForkServer] | None = None  # forks its restarts (a CPU run's test worker)
        self.broken = ""                    # why the current test's worker was lost, if it was
        self._arena_fds: tuple[int, ...] = ()
        self._output: list[str] = []
        self._output_lock = threading.Lock()

    def start(self) -> None:
        """A fresh worker process; `_connected(sock, to_judge_fd, from_judge_fd)` sets up the protocol."""
        self.generation += 1
        judge_end, worker_end = socket.socketpair()
        to_judge, from_judge = new_arena_fd("autograder-to-judge"), new_arena_fd("autograder-to-worker")
        fds = (worker_end.fileno(), to_judge, from_judge)
        args = ["--sock-fd", str(fds[0]), "--to-judge-fd", str(to_judge), "--from-judge-fd", str(from_judge),
                "--generation", str(self.generation), "--package", self.package]
        if self.guard is not None:
            args += ["--guard", json.dumps(list(self.guard))]
        env = {"OMP_WAIT_POLICY": "PASSIVE"} | dict(os.environ) | self.env | {ENV_ROLE: ROLE_WORKER}  # see grade._base_env
        hide, binds, fresh = list(_hidden_from_workers), self.view.get("binds", []), self.view.get("fresh", [])
        self.proc = None
        server = self.forkserver or (self.restart_server() if self.restart_server and self.generation > 1 else None)
        if server is not None:
            self.proc = server.spawn(args, fds, env, {"hide": hide, "binds": binds, "fresh": fresh})
        if self.proc is None:  # a fresh interpreter, behind the covers of the launcher (tests, records)
            argv = worker_view.launch_argv(sys.executable, hide, [sys.executable, "-m", "autograder.worker.server",
                                                                  *args], binds, fresh)
            self.proc = subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, start_new_session=True, env=env)
        own_time.clock().watch(self.proc.pid)  # its waits for a CPU do not count against a test's limit
        worker_end.close()
        self.sock = judge_end
        self._arena_fds = (to_judge, from_judge)  # the judge grows its arena through its fd: kept open
        self._connected(judge_end, to_judge, from_judge)
        threading.Thread(target=self._drain, args=(self.proc.stdout,), daemon=True).start()

    def _connected(self, sock: socket.socket, to_judge: int, from_judge: int) -> None:
        """What a subclass sets up for a fresh worker (its codec, its per-worker state)."""

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
        for fd in self._arena_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._arena_fds = ()
        self.proc = self.sock = None
        if reason:
            self.broken = reason

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
