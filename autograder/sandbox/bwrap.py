"""The bubblewrap backend: an empty root holding, read-only, only what a grading needs (system
libraries, a few files of /etc, the interpreter, the grader and the data; GPU devices when asked),
with the work dir the only writable place. A class folder, other checkouts of the course, the host's
home folders: none of them exists inside.

As an ordinary user, bwrap makes a user namespace. As root it runs without one, mounts what the
interpreter needs (pyenv installs under a private /root included) and then switches to the run's
own uid inside the sandbox, so RLIMIT_NPROC bounds fork bombs and nothing outside is writable.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.sandbox.base import RunRequest, RunResult, make_preexec, run_process, with_own_uid

# Runs as root inside the sandbox, then becomes the run's uid and execs the real command.
SWITCH_UID = "import os,sys; u=int(sys.argv[1]); os.setgroups([]); os.setgid(u); os.setuid(u); os.execv(sys.argv[2], sys.argv[2:])"


@functools.cache
def _probe() -> tuple[bool, str]:
    exe = shutil.which("bwrap")
    if exe is None:
        return False, "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    request = RunRequest(argv=[sys.executable, "-c", "pass"], workdir=Path("/tmp"), env={}, wall_s=30,
                         memory_mb=2048, uid=200_001 if os.geteuid() == 0 else None)
    argv = BwrapBackend().command(request)
    try:
        result = subprocess.run(argv, capture_output=True, timeout=30, preexec_fn=make_preexec(request, False, False))
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"bwrap failed to start: {e}"
    if result.returncode != 0:
        return False, f"bwrap cannot build a sandbox here: {result.stderr.decode(errors='replace').strip()[:300]}"
    return True, ""


# What every run sees of the host, read-only: the system's programs and libraries, and of /etc only
# what the loader, Python and torch read (never the whole /etc, nor /home, /root, /srv, /opt, /mnt).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "hosts", "host.conf", "localtime",
       "timezone", "ssl", "ca-certificates", "alternatives", "os-release", "mime.types", "fonts")
# With a GPU: the driver's view of the devices (/proc/driver/nvidia comes with the fresh /proc), and
# its daemon's socket.
GPU = ("/sys", "/run/nvidia-persistenced")


def _prefixes() -> list[Path]:
    """The interpreter's prefix and base prefix (a venv and the Python it was made from)."""
    return sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()})


def read_only_paths(request: RunRequest) -> list[Path]:
    """Every host path a run of `request` sees, read-only (those that exist)."""
    paths = [Path(p) for p in SYSTEM] + [Path("/etc") / name for name in ETC] + _prefixes()
    paths += [Path(p) for p in GPU] if request.gpu else []
    return [p for p in dict.fromkeys([*paths, *request.expose]) if os.path.lexists(p)]


def _binds(paths: list[Path]) -> list[str]:
    """Read-only binds of `paths`; a link (merged /usr: /bin -> usr/bin) stays a link. The folders
    on their way are made first, traversable (bwrap run as root would make them 0700)."""
    argv: list[str] = []
    made: set[Path] = set()
    for path in paths:
        for parent in reversed(path.parents):
            inside = any(parent == p or p in parent.parents for p in paths if p != path and not p.is_symlink())
            if parent != Path("/") and parent not in made and not inside:
                argv += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
    for path in paths:
        argv += ["--symlink", os.readlink(path), str(path)] if path.is_symlink() else ["--ro-bind", str(path), str(path)]
    return argv


class BwrapBackend:
    name = "bwrap"

    def available(self) -> tuple[bool, str]:
        return _probe()

    def notes(self) -> list[str]:
        return []

    def command(self, request: RunRequest) -> list[str]:
        """Nothing of the host is visible but what a grading needs (`read_only_paths`), /dev's
        devices when the run needs a GPU, and the work dir, the only writable place."""
        paths = read_only_paths(request)
        # /tmp first: a grader or interpreter that lives under the host's /tmp (an unpacked Gradescope
        # zip) is bound on top of the private /tmp, not hidden under it
        argv = ["bwrap", "--tmpfs", "/tmp", *_binds(paths), "--proc", "/proc"]
        argv += ["--dev-bind", "/dev", "/dev"] if request.gpu else ["--dev", "/dev"]
        for tree in request.hide:  # a hidden tree inside a bound one (a course under a venv's folder)
            if any(p in tree.parents for p in paths):
                argv += ["--tmpfs", str(tree)]
                argv += [a for p in request.expose if tree in p.parents for a in ("--ro-bind", str(p), str(p))]
        for parent in reversed(request.workdir.parents):  # under the private /tmp: traversable
            if Path("/tmp") in parent.parents:
                argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--bind", str(request.workdir), str(request.workdir)]
        for path in request.read_only:  # mounted read-only over the writable work dir: not even renamable
            if path.exists():
                argv += ["--ro-bind", str(path), str(path)]
        as_root = os.geteuid() == 0
        if as_root:
            argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        else:
            argv += ["--unshare-all"]
        argv += ["--die-with-parent", "--new-session", "--chdir", str(request.workdir), "--"]
        if as_root and request.uid is not None:
            argv += [sys.executable, "-c", SWITCH_UID, str(request.uid)]
        return argv + list(request.argv)

    def run(self, request: RunRequest) -> RunResult:
        """As root the run becomes its own uid inside the sandbox; the secret's pipe is inherited
        through bwrap, its fd number appended to argv."""
        request = with_own_uid(request)
        return run_process(self.command(request), request, isolate_net=False, switch_uid=False)
