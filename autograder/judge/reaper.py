"""The judge's hold on every process a rank leaves behind: as a child subreaper it inherits the
orphans of the ranks (a rank that forked, then exited), and it kills every child it did not start
for itself when a multi-rank test ends."""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphans of the ranks (a rank that forked, then exited) become this process's children."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def children_of(pid: int) -> list[int]:
    """Pids whose parent is `pid` (from /proc; empty where /proc cannot be read)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm)": state, ppid, ...
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry))
    return out


def kill_strays(keep: set[int], rounds: int = 50) -> list[int]:
    """Kill every child of this process not in `keep`, and what their deaths orphan to us; returns
    the pids killed."""
    killed: list[int] = []
    for _ in range(rounds):
        strays = [p for p in children_of(os.getpid()) if p not in keep]
        if not strays:
            break
        for pid in strays:
            for kill in (lambda p: os.killpg(os.getpgid(p), signal.SIGKILL), lambda p: os.kill(p, signal.SIGKILL)):
                try:
                    kill(pid)
                except (ProcessLookupError, PermissionError, OSError):
                    pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            killed.append(pid)
    return killed
