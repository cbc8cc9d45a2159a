"""The judge's end of the fork server (worker/zygote.py): rank workers forked from one interpreter
that imported torch once, so a multi-rank test's start costs a fork per rank, not an interpreter.

`ForkServer.spawn` stands in for `subprocess.Popen` in WorkerProcess.start: it returns a
`ForkedProcess` with the part of Popen's interface the judge uses (pid, stdout, poll, wait). The
zygote is the forked worker's parent; it reports each exit status here. Where the zygote cannot
start or has died, `spawn` returns None and the worker starts as a fresh interpreter.

Only CPU (gloo) ranks fork: a CUDA rank must not inherit a process that could have touched the
driver, and a GPU grading's few rank starts are not where its time goes. The test's own worker and
an audit worker start fresh too (one start per run, made while pytest collects).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from autograder.worker.zygote import MAX_MESSAGE

READY_TIMEOUT_S = 120.0


class ForkedProcess:
    """A worker forked by the zygote: Popen's pid, stdout, poll() and wait(timeout)."""

    def __init__(self, server: ForkServer, pid: int, stdout: Any) -> None:
        self.server, self.pid, self.stdout = server, pid, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            if (status := self.server.status_of(self.pid)) is not None:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif self.server.dead:
                self.returncode = -9  # the zygote died, and so did its children (PDEATHSIG): no status comes
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            with self.server.changed:
                self.server.changed.wait(0.05)
        assert self.returncode is not None
        return self.returncode


class ForkServer:
    """One zygote per judge, started on first use; thread-safe (ranks start from several threads)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.ctl: socket.socket | None = None
        self.dead = False
        self.changed = threading.Condition()
        self._statuses: dict[int, int] = {}
        self._replies: list[dict] = []
        self.ready = False  # the zygote has imported torch and waits for starts
        self._lock = threading.Lock()  # one start request in flight at a time
        self._starting = threading.Lock()  # one zygote, whichever thread asks first

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Launch the zygote (it imports torch in the background; the first spawn waits for it)."""
        with self._starting:
            self._start()

    def _start(self) -> None:
        if self.proc is not None or self.dead:
            return
        if "COVERAGE_PROCESS_START" in os.environ:  # `autograder tasks` measures each worker from its start:
            self.dead = True                         # a fork would carry the zygote's measurement instead
            return
        judge_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {"OMP_WAIT_POLICY": "PASSIVE"} | dict(os.environ)
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "autograder.worker.zygote", "--ctl-fd",
                                          str(zygote_end.fileno())], pass_fds=(zygote_end.fileno(),),
                                         stdin=subprocess.DEVNULL, env=env)
        except OSError:
            self.dead = True
            return
        finally:
            zygote_end.close()
        self.ctl = judge_end
        threading.Thread(target=self._listen, daemon=True, name="forkserver").start()

    def _listen(self) -> None:
        assert self.ctl is not None
        while True:
            try:
                data = self.ctl.recv(MAX_MESSAGE)
            except OSError:
                data = b""
            with self.changed:
                if not data:
                    self.dead = True
                else:
                    message = json.loads(data)
                    if "exited" in message:
                        self._statuses[message["exited"]] = message["status"]
                    elif "ready" in message:
                        self.ready = True
                    else:
                        self._replies.append(message)
                self.changed.notify_all()
            if not data:
                return

    def _reply(self, timeout_s: float) -> dict | None:
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while not (self._replies or self.dead) and time.monotonic() < deadline:
                self.changed.wait(0.1)
            return self._replies.pop(0) if self._replies else None

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while not (self.ready or self.dead) and time.monotonic() < deadline:
                self.changed.wait(0.1)
            return self.ready and not self.dead

    def status_of(self, pid: int) -> int | None:
        with self.changed:
            return self._statuses.get(pid)

    def spawn(self, args: list[str], fds: tuple[int, int, int], env: dict[str, str],
              view: dict[str, list]) -> ForkedProcess | None:
        """A worker (`python -m autograder.worker.server *args`) forked with descriptors `fds`
        (socket, to-judge arena, from-judge arena), environment `env` and mount view `view`
        ({"hide", "binds", "fresh"}); None where the zygote is not there to fork it."""
        self.start()
        if self.ctl is None or self.dead:
            return None
        request = {"start": {"args": args, "env": env, "cwd": os.getcwd(), "view": view}}
        read_end, write_end = os.pipe()
        reply = None
        try:
            with self._lock:
                if self._wait_ready(READY_TIMEOUT_S):
                    socket.send_fds(self.ctl, [json.dumps(request).encode()], [*fds, write_end])
                    reply = self._reply(READY_TIMEOUT_S)
        except OSError:
            reply = None
        finally:
            os.close(write_end)
        if not reply or "started" not in reply:
            os.close(read_end)
            return None
        return ForkedProcess(self, reply["started"], os.fdopen(read_end, "rb"))

    def close(self) -> None:
        if self.ctl is not None:
            self.ctl.close()
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.dead = True
