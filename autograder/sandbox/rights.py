"""What this process may do to confine a child: make a network namespace, switch to another uid.

As root in a container with Docker's default capabilities (no CAP_SYS_ADMIN, no CAP_NET_ADMIN), a
network namespace is refused; where CAP_SETUID is dropped too, so is a uid of the run's own. Each is
tried once in a forked child (the caller's own process keeps its namespaces and uid), and the
backends confine with what is possible and say what is not, instead of dying in a child's preexec.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import os
import socket
import struct

CLONE_NEWNET = 0x40000000


def loopback_up() -> None:
    """Bring `lo` up in this (new) network namespace: SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP.
    Nothing is imported here: it runs in a child forked from a process that may have threads."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, siocgifflags, struct.pack("16sH14x", b"lo", 0)))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def isolate_network() -> None:
    """Enter a new network namespace with `lo` up (multi-rank tests talk over it); OSError if refused."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare(CLONE_NEWNET): {os.strerror(errno)}")
    loopback_up()  # a new network namespace starts with lo down


@functools.cache
def network_isolation() -> str:
    """"" when this process may give a child an empty network namespace, else why not (root in a
    container without CAP_SYS_ADMIN / CAP_NET_ADMIN, Docker's default set; or not root at all)."""
    if os.geteuid() != 0:
        return "not root"
    pid = os.fork()
    if pid == 0:  # try it in a child: this process keeps its own namespace
        try:
            isolate_network()
            os._exit(0)
        except BaseException:  # noqa: BLE001  any failure means: not here
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return "" if os.waitstatus_to_exitcode(status) == 0 else "no right to make a network namespace (CAP_SYS_ADMIN, CAP_NET_ADMIN)"


@functools.cache
def can_switch_uid() -> bool:
    """Whether a child of this process may become another uid (root with CAP_SETUID / CAP_SETGID)."""
    if os.geteuid() != 0:
        return False
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(200_002)
            os.setuid(200_002)
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
