"""The fork server of a judge's rank workers: one fresh interpreter that imports torch once and forks
each rank's worker from there, instead of a fresh interpreter (and a torch import, ~2 s of CPU) per
rank per test.

    python -m autograder.worker.zygote --ctl-fd N      (started by judge/forkserver.py)

It is started by the judge as the worker is (a fresh interpreter, never a fork of the judge: it
never holds the key) and imports only trusted code: torch, torch.distributed and the worker's own
modules, never the package. Each start request brings the worker's three descriptors and the write
end of its output pipe (SCM_RIGHTS), its environment, working directory and mount view; the child
does what the launcher (judge/worker_view.py) and a fresh interpreter would: its own session, every
other descriptor closed, the covers built, the capabilities of its namespaces dropped, and then the
worker's main. The zygote reaps its children and tells the judge each exit status.

Control messages are JSON on a SOCK_SEQPACKET socket: {"start": {...}} + 4 fds -> {"started": pid}
or {"failed": why}; {"exited": pid, "status": waitstatus} whenever a child ends.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import signal
import socket
import sys
import tempfile
import warnings

PR_SET_DUMPABLE = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
MAX_MESSAGE = 1 << 20


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def drop_capabilities() -> None:
    """Empty effective, permitted and inheritable sets: what exec as a non-root uid does after the
    launcher's unshare (the namespaces' capabilities must not reach the submission)."""
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset: cannot drop the namespace's capabilities")


def _keep_only(fds: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in fds:
            try:
                os.close(fd)
            except OSError:
                pass


def _become_worker(request: dict, fds: list[int]) -> None:
    """In the forked child: the worker's process as the launcher and a fresh interpreter make it."""
    from autograder.worker import covers  # imported before the fork (below): no file is read here

    sock, to_judge, from_judge, output = fds
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    _keep_only({sock, to_judge, from_judge})
    _prctl(PR_SET_DUMPABLE, 1)  # the zygote is not dumpable; a worker is, as a fresh process is
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # TMPDIR is the rank's own
    view = request["view"]
    if view["hide"] or view["binds"] or view["fresh"]:
        try:
            covers.cover(view["hide"], [tuple(b) for b in view["binds"]], view["fresh"])
        except OSError as exc:
            print(f"{covers.NOT_BUILT} {exc}", flush=True)
    if os.getuid() != 0:
        drop_capabilities()
    args = [str(a) for a in request["args"]]
    args[args.index("--sock-fd") + 1], args[args.index("--to-judge-fd") + 1] = str(sock), str(to_judge)
    args[args.index("--from-judge-fd") + 1] = str(from_judge)
    sys.argv = ["-m autograder.worker.server", *args]
    from autograder.worker import server

    server.main(args)


def _fork(request: dict, fds: list[int]) -> int:
    """The child's pid once it leads its own session (the judge kills workers by process group)."""
    led_r, led_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(led_r)
            os.setsid()
            os.close(led_w)
            _become_worker(request, fds)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001  the worker's last words, then out: never back into the loop
            print(f"worker start failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        finally:
            os._exit(code)
    os.close(led_w)
    os.read(led_r, 1)  # EOF: the child has its session (or is gone)
    os.close(led_r)
    return pid


def _reap(ctl: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        ctl.send(json.dumps({"exited": pid, "status": status}).encode())


def serve(ctl: socket.socket) -> None:
    children: set[int] = set()
    ctl.send(b'{"ready": true}')
    while True:
        readable, _, _ = select.select([ctl], [], [], 0.05)
        _reap(ctl, children)
        if not readable:
            continue
        data, fds, _flags, _addr = socket.recv_fds(ctl, MAX_MESSAGE, 4)
        if not data:
            return  # the judge closed its end: its children die with their parent (PDEATHSIG)
        try:
            request = json.loads(data)["start"]
            if len(fds) != 4:
                raise ValueError(f"a start needs 4 descriptors, got {len(fds)}")
            pid = _fork(request, fds)
            children.add(pid)
            reply = {"started": pid}
        except (ValueError, KeyError, OSError) as exc:
            reply = {"failed": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                os.close(fd)
        ctl.send(json.dumps(reply).encode())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the fork server of a judge's rank workers")
    parser.add_argument("--ctl-fd", type=int, required=True)
    opts = parser.parse_args(argv)
    # It ends when the judge's end of the control socket closes (the judge exited or was killed: the
    # kernel closes its descriptors), and its children with it (each worker's PDEATHSIG). Not
    # PDEATHSIG here: that follows the judge's thread that started it, which may end first.
    _prctl(PR_SET_DUMPABLE, 0)  # a worker may not ptrace or read the memory of the process it came from
    warnings.simplefilter("ignore", DeprecationWarning)  # fork() with torch's idle native thread
    import torch
    import torch.distributed  # noqa: F401

    from autograder.worker import (
        covers,  # noqa: F401  the child's launcher part
        server,  # noqa: F401
    )

    serve(socket.socket(fileno=opts.ctl_fd))


if __name__ == "__main__":
    main()
