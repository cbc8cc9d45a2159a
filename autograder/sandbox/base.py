"""What every sandbox backend takes and returns, and the process runner they share.

A backend turns a `RunRequest` (argv, work dir, limits, a secret) into a `RunResult`, and owns how
the run gets its user id and its secret: the caller only says what to run. As root, every run gets a
fresh uid of its own owning the work dir (`with_own_uid`: RLIMIT_NPROC bounds a fork bomb and the
course files are not writable). The shared runner starts the process in its own session under
resource limits, hands it the secret through a pipe whose fd number follows `secret_flag` in argv
(never argv or the environment, which student code could read), enforces the wall limit by killing
the whole process group, and afterwards kills whatever that uid left behind.
"""

from __future__ import annotations

import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from autograder.errors import GraderError
from autograder.sandbox.rights import can_switch_uid, isolate_network

OUTPUT_TAIL_CHARS = 20_000


@dataclass(frozen=True)
class RunRequest:
    argv: list[str]
    workdir: Path
    env: dict[str, str]
    wall_s: float
    memory_mb: int
    gpu: bool = False
    secret: bytes = field(default=b"", repr=False)  # e.g. the records' HMAC key: only the run may read it
    secret_flag: str = ""           # argv gets `secret_flag <fd>` where the run reads `secret` from fd
    hide: tuple[Path, ...] = ()     # trees the process must not see (the course repo)
    expose: tuple[Path, ...] = ()   # read-only paths inside hidden trees it needs (grader, venv)
    read_only: tuple[Path, ...] = ()  # paths in the work dir the run must not change (the master tests)
    uid: int | None = None          # run as this uid (set by the backend through with_own_uid; None: our own)
    progress_file: Path | None = None  # a file the run appends to as it progresses ...
    stall_s: float | None = None       # ... killed when it has not grown for this long
    startup_s: float = 180.0           # grace before the first growth (imports, collection)
    processes: int = 1                 # workers alive at once (the test's, plus one per rank): docker's
                                       # memory limit covers them all; RLIMIT_AS bounds each one


@dataclass
class RunResult:
    returncode: int | None
    timed_out: bool
    wall_s: float
    output: str = ""
    stalled: bool = False

    @property
    def signal_name(self) -> str | None:
        """The signal that ended the process: negative codes from Popen, 128+n from bwrap/docker."""
        code = self.returncode
        number = -code if code is not None and code < 0 else code - 128 if code and 128 < code < 160 else None
        if number is None:
            return None
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"

    def describe(self) -> str:
        """One line on how the process ended, for the failure reason of tests without results."""
        if self.stalled:
            return f"the test process reported nothing for {self.wall_s:.0f} s and was killed"
        if self.timed_out:
            return f"the test file hit its wall limit ({self.wall_s:.0f} s) and was killed"
        if self.signal_name:
            hint = {"SIGSEGV": " (segmentation fault)", "SIGKILL": " (killed: out of memory?)",
                    "SIGXCPU": " (CPU time limit)", "SIGXFSZ": " (file size limit)"}
            return f"the test process died with {self.signal_name}{hint.get(self.signal_name, '')}"
        return f"the test process exited with status {self.returncode} before reporting this test"


def sandbox_uid() -> int | None:
    """A fresh unprivileged uid for this run when we are root (and may switch uids), else None."""
    if os.geteuid() != 0 or not can_switch_uid():
        return None
    return random.randrange(200_000, 2_000_000_000)


def with_own_uid(request: RunRequest) -> RunRequest:
    """The request with a fresh uid of its own when we are root (unless it names one), the work dir
    handed to that uid: the run must write its results, caches and temp files there."""
    uid = request.uid if request.uid is not None else sandbox_uid()
    give_to(request.workdir, uid)
    return replace(request, uid=uid)


def give_to(workdir: Path, uid: int | None) -> None:
    """Hand the work dir (and all it holds) to `uid`; nothing to do without one."""
    if uid is None:
        return
    for dirpath, _dirnames, filenames in os.walk(workdir):
        os.chown(dirpath, uid, uid)
        for name in filenames:
            os.chown(os.path.join(dirpath, name), uid, uid)


class _SecretPipe:
    """A pipe holding the request's secret, its read end passed to the run; closed on exit."""

    def __init__(self, request: RunRequest) -> None:
        self.fds: tuple[int, ...] = ()
        self.argv_tail: list[str] = []
        if request.secret:
            read_fd, write_fd = os.pipe()
            os.write(write_fd, request.secret)  # a secret is small: it fits in any pipe buffer
            os.close(write_fd)
            self.fds, self.argv_tail = (read_fd,), [request.secret_flag, str(read_fd)]

    def __enter__(self) -> _SecretPipe:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self.fds:
            os.close(fd)


def _count_processes(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return count


def _limits(request: RunRequest, uid: int | None) -> list[tuple[int, int]]:
    cpus = os.cpu_count() or 1
    owner = uid if uid is not None else os.getuid()
    nproc = 1024 + (0 if uid is not None else _count_processes(owner))
    limits = [
        (resource.RLIMIT_CPU, int(request.wall_s * cpus) + 30),
        (resource.RLIMIT_FSIZE, 2 << 30),
        (resource.RLIMIT_NOFILE, 4096),
        (resource.RLIMIT_NPROC, nproc),
        (resource.RLIMIT_CORE, 0),
    ]
    if not request.gpu:  # CUDA reserves huge virtual ranges: on GPUs memory is docker's job
        limits.append((resource.RLIMIT_AS, request.memory_mb << 20))
    return limits


def world_reachable(path: Path) -> bool:
    """Whether an unprivileged uid can reach `path` (every ancestor directory has o+x)."""
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents] if p.exists())


def python_reachable() -> bool:
    """Whether another uid can run this interpreter (pyenv under /root often is not)."""
    return all(world_reachable(Path(p).resolve()) for p in (sys.base_prefix, sys.prefix))


def make_preexec(request: RunRequest, isolate_net: bool, switch_uid: bool = True) -> Callable[[], None]:
    """Limits, network isolation and (when `switch_uid`) the switch to `request.uid`, in the child.
    Callers ask for isolation only where `network_isolation()` found it possible."""
    limits = _limits(request, request.uid)
    uid = request.uid if switch_uid else None

    def preexec() -> None:  # runs in the child between fork and exec
        if isolate_net and os.geteuid() == 0:
            isolate_network()
        for which, value in limits:
            soft, hard = resource.getrlimit(which)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (cap, cap))
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    return preexec


def kill_uid(uid: int) -> None:
    """Kill every process owned by `uid` (fork bombs, daemons that left the process group)."""
    pid = os.fork()
    if pid == 0:  # child: become the uid, then signal everything it may signal
        try:
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def reap_uid(uid: int, patience_s: float = 10.0) -> bool:
    """Kill `uid`'s processes until none is left (a fork bomb forks while being killed)."""
    deadline = time.monotonic() + patience_s
    while True:
        kill_uid(uid)
        if _count_processes(uid) == 0:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def run_process(argv: list[str], request: RunRequest, isolate_net: bool, switch_uid: bool = True) -> RunResult:
    """Run `argv` under the request's limits; never raises for anything the child does.

    The child switches to `request.uid` itself unless `switch_uid` is False (bwrap run as root
    switches inside the sandbox, after it has mounted what the interpreter needs).
    """
    uid = request.uid
    with tempfile.TemporaryFile(mode="w+b") as log, _SecretPipe(request) as secret:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv + secret.argv_tail, cwd=request.workdir, env=request.env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=secret.fds,
                preexec_fn=make_preexec(request, isolate_net, switch_uid),
            )
        except (OSError, subprocess.SubprocessError) as exc:  # the grader's set-up, never the submission's
            raise GraderError(f"the sandbox cannot start a process here ({type(exc).__name__}: {exc}); "
                              "grade with another --sandbox") from exc
        timed_out, stalled = _watch(proc, request, start)
        _kill_group(proc.pid)
        returncode = proc.wait()
        if uid is not None:
            reap_uid(uid)
        wall = time.monotonic() - start
        log.seek(0)
        data = log.read()[-OUTPUT_TAIL_CHARS * 4 :].decode(errors="replace")
    if stalled:
        wall = request.stall_s or wall
    elif timed_out:
        wall = request.wall_s
    return RunResult(returncode, timed_out or stalled, wall, data[-OUTPUT_TAIL_CHARS:], stalled=stalled)


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path else 0
    except OSError:
        return 0


def _watch(proc: subprocess.Popen, request: RunRequest, start: float) -> tuple[bool, bool]:
    """Wait for the process; (timed out, stalled)."""
    if request.stall_s is None:
        try:
            proc.wait(timeout=request.wall_s)
            return False, False
        except subprocess.TimeoutExpired:
            return True, False
    return watch(lambda: proc.poll() is not None, request, start)


def watch(finished: Callable[[], bool], request: RunRequest, start: float, every_s: float = 0.2) -> tuple[bool, bool]:
    """Poll until `finished()`; (timed out, stalled). A stall is no growth of the progress file for
    `request.stall_s` (or `startup_s` before its first growth); without `stall_s`, only the wall limit."""
    size, last_change, limit = _size(request.progress_file), time.monotonic(), request.startup_s
    while not finished():
        now = time.monotonic()
        if now - start > request.wall_s:
            return True, False
        if request.stall_s is not None:
            if (grown := _size(request.progress_file)) != size:
                size, last_change, limit = grown, now, request.stall_s
            elif now - last_change > limit:
                return False, True
        time.sleep(every_s)
    return False, False


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
