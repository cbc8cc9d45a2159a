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

import os
import sys

from autograder.worker.covers import NOT_BUILT, cover


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


def launch_argv(python: str, hide: list[str], argv: list[str], binds: list[tuple[str, str]] = (),
                fresh: list[str] = ()) -> list[str]:
    """The command that starts `argv` behind the covers (argv itself when there is nothing to do)."""
    if not (hide or binds or fresh):
        return argv
    options = ["--hide", ",".join(hide), "--bind", ",".join(f"{s}={t}" for s, t in binds), "--fresh", ",".join(fresh)]
    return [python, "-m", "autograder.judge.worker_view", *options, "--", *argv]


USAGE = "usage: worker_view --hide PATH[,PATH...] [--bind SRC=DST[,...]] [--fresh PATH[,...]] -- COMMAND..."


def _options(args: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """({option: comma-separated values}, the command after "--")."""
    if "--" not in args:
        raise SystemExit(USAGE)
    cut = args.index("--")
    head, command = args[:cut], args[cut + 1:]
    if len(head) % 2 or not command or any(k not in ("--hide", "--bind", "--fresh") for k in head[::2]):
        raise SystemExit(USAGE)
    return {k: [v for v in value.split(",") if v] for k, value in zip(head[::2], head[1::2])}, command


def main(args: list[str]) -> None:
    if args[:1] == ["--check"]:
        why = available()
        print(why or "ok")
        sys.exit(0 if not why else 1)
    options, command = _options(args)
    binds = [tuple(b.split("=", 1)) for b in options.get("--bind", []) if "=" in b]
    try:
        cover(options.get("--hide", []), binds, options.get("--fresh", []))  # type: ignore[arg-type]
    except OSError as exc:
        print(f"{NOT_BUILT} {exc}", flush=True)
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
