"""The docker backend for GPU runners: one named container per run, driven through the Docker SDK.

No network, memory and pids limits, a read-only root, every capability dropped, all GPUs when the
run needs one, and the work dir mounted at the same path. The image must hold Python, torch and the
`autograder` package (see gpu_runners/); its own PATH and PYTHONPATH are kept, never the host's.

A file descriptor cannot cross into a container, so the run's secret (the HMAC key) goes into a
file in the work dir, readable only by the container's user; a tiny launcher inside opens it at
`SECRET_FD`, deletes it and then starts the command, whose argv ends with `secret_flag SECRET_FD`.
The key is thus never in argv, nor in the environment (which /proc/self/environ would keep for
student code to read).
A run that hits its wall limit is killed by container name, and every container is removed.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.sandbox.base import OUTPUT_TAIL_CHARS, RunRequest, RunResult, watch, with_own_uid

DEFAULT_IMAGE = "course-autograder:gpu"
CPU_IMAGE = "course-autograder:cpu"  # containers/cpu/build.sh (`make cpu-image`): CPU gradings
FD_FILE_PREFIX = ".ag-fd-"
SECRET_FD = 3  # the first descriptor after stdio: free when the launcher starts
PIDS_LIMIT = 1024

# Runs first in the container: argv[1] is "fd=path,fd=path"; each file becomes that fd, then vanishes.
# argv[2] bounds each process's address space in bytes (0: no bound), as the other backends' RLIMIT_AS
# does: the container's cgroup limit alone makes a runaway allocation an OOM kill that stalls the
# whole file, where the rlimit makes it a MemoryError in the one test that allocated.
LAUNCHER = (
    "import os,sys,resource\n"
    "if int(sys.argv[2]):\n"
    "    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))\n"
    "for item in filter(None, sys.argv[1].split(',')):\n"
    "    number, path = item.split('=', 1)\n"
    "    fd = os.open(path, os.O_RDONLY)\n"
    "    os.unlink(path)\n"
    "    if fd != int(number):\n"
    "        os.dup2(fd, int(number))\n"
    "        os.close(fd)\n"
    "    os.set_inheritable(int(number), True)\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)


@dataclass(frozen=True)
class FdFile:
    """The bytes of one passed fd, staged as a file the launcher re-opens at `number`."""

    number: int
    path: Path


def stage_fds(request: RunRequest, owner: tuple[int, int] | None) -> list[FdFile]:
    """The request's secret as a 0400 file in the work dir, for the launcher to open at SECRET_FD."""
    if not request.secret:
        return []
    path = request.workdir / f"{FD_FILE_PREFIX}{SECRET_FD}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(request.secret)
    if owner is not None:
        os.chown(path, *owner)
    return [FdFile(SECRET_FD, path)]


def container_user(request: RunRequest) -> str:
    """The run's own uid when the grader is root (the work dir was handed to it), else the invoking
    user's uid:gid, who owns the work dir, so the run can write its results there."""
    if request.uid is not None:
        return f"{request.uid}:{request.uid}"
    return f"{os.getuid()}:{os.getgid()}"


def container_env(request: RunRequest, image_env: list[str]) -> dict[str, str]:
    """The run's variables without the host's PATH, and PYTHONPATH reduced to the work dir plus the
    image's own entries (host paths such as the grader's checkout do not exist in the image)."""
    image = dict(item.split("=", 1) for item in image_env if "=" in item)
    env = {k: v for k, v in request.env.items() if k not in ("PATH", "PYTHONPATH")}
    inside = [p for p in request.env.get("PYTHONPATH", "").split(os.pathsep)
              if p and Path(p).is_relative_to(request.workdir)]
    paths = inside + [p for p in image.get("PYTHONPATH", "").split(os.pathsep) if p]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def container_config(request: RunRequest, image: str, image_env: list[str], fds: list[FdFile],
                     name: str) -> dict[str, Any]:
    """Keyword arguments of `client.containers.run` for this request (no daemon needed to build)."""
    workdir = str(request.workdir)
    launcher = ",".join(f"{f.number}={f.path}" for f in fds)
    secret = [request.secret_flag, str(SECRET_FD)] if fds else []
    address_space = 0 if request.gpu else request.memory_mb << 20  # CUDA reserves huge virtual ranges
    command = ["python3", "-c", LAUNCHER, launcher, str(address_space),
               "python3", *request.argv[1:], *secret]  # the image's interpreter
    config: dict[str, Any] = {
        "image": image, "command": command, "name": name, "detach": True, "labels": {"autograder": "run"},
        "network_mode": "none", "mem_limit": f"{request.memory_mb * request.processes}m",
        "memswap_limit": f"{request.memory_mb * request.processes}m",
        "pids_limit": PIDS_LIMIT * request.processes, "read_only": True, "tmpfs": {"/tmp": ""}, "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"], "user": container_user(request),
        "volumes": {workdir: {"bind": workdir, "mode": "rw"}}, "working_dir": workdir,
        "environment": container_env(request, image_env), "stdin_open": False,
    }
    for path in request.read_only:  # the master tests, read-only over the writable work dir
        if path.exists():
            config["volumes"][str(path)] = {"bind": str(path), "mode": "ro"}
    if request.gpu:
        from docker.types import DeviceRequest

        config["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return config


class DockerBackend:
    name = "docker"

    def __init__(self, image: str | None = None, client: Any = None, gpu: bool = True) -> None:
        self.image = image or os.environ.get("AUTOGRADER_IMAGE") or (DEFAULT_IMAGE if gpu else CPU_IMAGE)
        self._client = client

    def client(self) -> Any:
        if self._client is None:
            import docker

            self._client = docker.from_env()
        return self._client

    def available(self) -> tuple[bool, str]:
        try:
            from docker.errors import DockerException
            from requests.exceptions import RequestException
        except ImportError:
            return False, "the Docker SDK is not installed (pip install 'docker>=7.1,<8'; `make` installs it)"
        try:
            self.client().ping()
        except (DockerException, RequestException) as e:
            return False, f"no Docker engine answers ({type(e).__name__}: {str(e)[:200]})"
        try:
            self.image_env()
        except (DockerException, RequestException):
            how = ("make cpu-image" if self.image == CPU_IMAGE else
                   f"docker build -f gpu_runners/Dockerfile -t {self.image} .")
            return False, f"no image {self.image!r}: build it ({how})"
        return True, ""

    def notes(self) -> list[str]:
        return []

    def image_env(self) -> list[str]:
        """The image's own environment ("KEY=value"), whose PATH and PYTHONPATH the run keeps."""
        return self.client().images.get(self.image).attrs.get("Config", {}).get("Env") or []

    def run(self, request: RunRequest) -> RunResult:
        request = with_own_uid(request)
        client = self.client()
        owner = (request.uid, request.uid) if request.uid is not None else None
        fds = stage_fds(request, owner)
        image_env = self.image_env()
        name = f"autograder-{secrets.token_hex(8)}"
        start = time.monotonic()
        container = client.containers.run(**container_config(request, self.image, image_env, fds, name))
        try:
            timed_out, stalled = watch(lambda: _exited(container), request, start, every_s=0.5)
            if timed_out or stalled:
                _kill(container)
            code = container.wait().get("StatusCode")
            output = container.logs(stdout=True, stderr=True)[-OUTPUT_TAIL_CHARS * 4:].decode(errors="replace")
        finally:
            container.remove(force=True)  # also kills it, whatever went wrong above
            for f in fds:
                f.path.unlink(missing_ok=True)
        wall = time.monotonic() - start
        if stalled:
            wall = request.stall_s or wall
        elif timed_out:
            wall = request.wall_s
        return RunResult(code, timed_out or stalled, wall, output[-OUTPUT_TAIL_CHARS:], stalled=stalled)


def _exited(container: Any) -> bool:
    container.reload()
    return container.status in ("exited", "dead")


def _kill(container: Any) -> None:
    from docker.errors import APIError

    try:
        container.kill()
    except APIError:  # it exited between the check and the kill: nothing left to stop
        return
