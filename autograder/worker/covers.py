"""The covers of a worker's mount view (judge/worker_view.py tells why and how): a user and a mount
namespace of this process, the test folders under empty read-only tmpfs, the covers locked by a
second pair of namespaces. Worker-side code: the launcher runs it before it execs the worker, and
the fork server (worker/zygote.py) in each forked worker before the worker's main."""

from __future__ import annotations

import ctypes
import os

CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
MS_BIND, MS_REMOUNT = 0x1000, 0x20
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


def cover(paths: list[str], binds: list[tuple[str, str]] = (), fresh: list[str] = ()) -> None:
    """Enter a user + mount namespace of this process and hide each existing path under an empty
    read-only tmpfs; OSError (nothing half-done is left visible to rely on) where that is refused.

    fresh: folders that get an empty writable tmpfs first (an audit worker must not read what an
    earlier worker wrote there); the working directory, if inside one, is bound back in place.
    binds: (source, target) folders: a read-only view of source at target, made before the covers
    (a source inside a covered folder stays readable through its bind)."""
    libc = _libc()
    _enter_namespaces(libc)
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    for path in fresh:
        _empty(libc, path, keep=os.getcwd())
    for source, target in binds:
        _check(libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {target}")
        _check(libc.mount(b"none", target.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC, None),
               f"make {target} read-only")
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    for path in paths:
        if os.path.isdir(path):
            _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", flags, b"size=4k,mode=0"), f"cover {path}")
        elif os.path.exists(path):
            _check(libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None), f"cover {path}")
    # A second pair of namespaces locks the covers: a mount that a less privileged namespace
    # inherits cannot be unmounted there, even by a worker that runs as uid 0 (no own uid: root
    # keeps its capabilities in its namespace across exec).
    _enter_namespaces(libc)


def _empty(libc: ctypes.CDLL, path: str, keep: str) -> None:
    """An empty writable tmpfs over folder `path`; `keep` (a folder inside it) is bound back where it
    was, through a descriptor opened before the tmpfs hid it."""
    if not os.path.isdir(path):
        return
    inside = os.path.commonpath([path, keep]) == path and keep != path
    fd = os.open(keep, os.O_PATH | os.O_DIRECTORY) if inside else -1
    try:
        _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777"), f"empty {path}")
        if inside:
            os.makedirs(keep, exist_ok=True)
            _check(libc.mount(f"/proc/self/fd/{fd}".encode(), keep.encode(), None, MS_BIND | MS_REC, None),
                   f"bind {keep} back")
    finally:
        if fd >= 0:
            os.close(fd)


def _enter_namespaces(libc: ctypes.CDLL) -> None:
    """A new user namespace (this uid and gid mapped to themselves) owning a new mount namespace."""
    uid, gid = os.getuid(), os.getgid()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(user, mount)")
    _write("/proc/self/setgroups", "deny")  # required before an unprivileged gid_map
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
