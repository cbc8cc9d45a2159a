"""The bubblewrap backend: a read-only view of the machine with only the work dir writable.

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


def _private_ancestors() -> list[Path]:
    """Directories on the interpreter's path that other uids cannot traverse (e.g. /root)."""
    found = []
    for prefix in {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}:
        for parent in reversed(prefix.parents):
            if parent != Path("/") and not os.stat(parent).st_mode & 0o001 and parent not in found:
                found.append(parent)
                break
    return found


class BwrapBackend:
    name = "bwrap"

    def available(self) -> tuple[bool, str]:
        return _probe()

    def command(self, request: RunRequest) -> list[str]:
        as_root = os.geteuid() == 0
        argv = ["bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--tmpfs", "/tmp"]
        argv += ["--dev-bind", "/dev", "/dev"] if request.gpu else ["--dev", "/dev"]
        for tree in request.hide:
            argv += ["--tmpfs", str(tree)]
        if as_root:  # make the interpreter reachable for the unprivileged uid
            private = _private_ancestors()
            for folder in private:
                argv += ["--perms", "0755", "--tmpfs", str(folder)]
            for prefix in sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}):
                for parent in reversed(prefix.parents):  # bwrap would create these as 0700
                    if any(p in parent.parents for p in private):
                        argv += ["--perms", "0755", "--dir", str(parent)]
                argv += ["--ro-bind", str(prefix), str(prefix)]
        for path in request.expose:
            if path.exists():
                argv += ["--ro-bind", str(path), str(path)]
        for parent in reversed(request.workdir.parents):  # under the private /tmp: traversable
            if Path("/tmp") in parent.parents:
                argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--bind", str(request.workdir), str(request.workdir)]
        for path in request.read_only:  # mounted read-only over the writable work dir: not even renamable
            if path.exists():
                argv += ["--ro-bind", str(path), str(path)]
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
