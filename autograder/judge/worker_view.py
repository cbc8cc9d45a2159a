"""The worker's own mount view: the judge starts the worker through this launcher, which covers the
test folders and the judge's own files before the submission's process exists.

    python -m autograder.judge.worker_view --hide /run/tests,/run/.judge -- python -m autograder.worker.server ...

The launcher unshares a user and a mount namespace (its uid maps to itself, nothing more), makes
every mount private, mounts an empty read-only tmpfs over each folder to hide, and then execs the
worker. Its uid is not 0 inside the namespace, so the exec drops every capability the namespace
gave: the worker cannot unmount the covers, and a namespace it makes of its own locks them (the
kernel never lets a less privileged namespace uncover a mount it inherited). What stays visible is
what the worker needs: the package, the master conftest and data at the work dir's root, the
interpreter, the grader. Test functions it must run (`in_worker`) arrive as source over its socket.

Where namespaces are refused (Docker's default seccomp profile, a kernel without unprivileged user
namespaces) the launcher says so on its output and execs the worker with the judge's view: the
public/hidden split of the runs still keeps hidden files out of a public run (the probe notes it).
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
NOT_BUILT = "[worker view] not built:"  # the launcher's line when it falls back (in the worker's output)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def cover(paths: list[str]) -> None:
    """Enter a user + mount namespace of this process and hide each existing path under an empty
    read-only tmpfs; OSError (nothing half-done is left visible to rely on) where that is refused."""
    libc = _libc()
    _enter_namespaces(libc)
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    for path in paths:
        if os.path.isdir(path):
            _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", flags, b"size=4k,mode=0"), f"cover {path}")
        elif os.path.exists(path):
            _check(libc.mount(b"/dev/null", path.encode(), None, 0x1000, None), f"cover {path}")  # MS_BIND
    # A second pair of namespaces locks the covers: a mount that a less privileged namespace
    # inherits cannot be unmounted there, even by a worker that runs as uid 0 (no own uid: root
    # keeps its capabilities in its namespace across exec).
    _enter_namespaces(libc)


def _enter_namespaces(libc: ctypes.CDLL) -> None:
    """A new user namespace (this uid and gid mapped to themselves) owning a new mount namespace."""
    uid, gid = os.getuid(), os.getgid()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(user, mount)")
    _write("/proc/self/setgroups", "deny")  # required before an unprivileged gid_map
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def available() -> str:
    """"" when a worker view can be built here, else why not (run in a child: the caller stays put)."""
    pid = os.fork()
    if pid == 0:
        try:
            cover([])
            os._exit(0)
        except OSError as exc:
            os.write(2, f"{exc}\n".encode())
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return "" if os.waitstatus_to_exitcode(status) == 0 else "user namespaces are refused here"


def launch_argv(python: str, hide: list[str], argv: list[str]) -> list[str]:
    """The command that starts `argv` behind the covers (argv itself when there is nothing to hide)."""
    if not hide:
        return argv
    return [python, "-m", "autograder.judge.worker_view", "--hide", ",".join(hide), "--", *argv]


def main(args: list[str]) -> None:
    if args[:1] == ["--check"]:
        why = available()
        print(why or "ok")
        sys.exit(0 if not why else 1)
    if len(args) < 4 or args[0] != "--hide" or args[2] != "--":
        raise SystemExit("usage: worker_view --hide PATH[,PATH...] -- COMMAND...")
    try:
        cover([p for p in args[1].split(",") if p])
    except OSError as exc:
        print(f"{NOT_BUILT} {exc}", flush=True)
    os.execv(args[3], args[3:])


if __name__ == "__main__":
    main(sys.argv[1:])
