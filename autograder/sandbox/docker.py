"""The docker backend for GPU runners: one container per test file.

`--network none`, memory and pids limits, `--gpus all` when the assignment has GPU tests, the work
dir mounted at the same path. The image must hold Python, torch and the `autograder` package (see
gpu_runners/); the HMAC key travels in an environment variable, since a pipe cannot cross
`docker run`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace

from autograder.sandbox.base import RunRequest, RunResult, run_process

DEFAULT_IMAGE = "course-autograder:gpu"
DOCKER_UID = 65534  # the work dir is handed to this uid before the run


class DockerBackend:
    name = "docker"

    def __init__(self, image: str | None = None) -> None:
        self.image = image or os.environ.get("AUTOGRADER_IMAGE", DEFAULT_IMAGE)

    def available(self) -> tuple[bool, str]:
        if shutil.which("docker") is None:
            return False, "the docker client is not installed"
        probe = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True)
        if probe.returncode != 0:
            return False, "no Docker engine answers (`docker info` failed)"
        return True, ""

    def command(self, request: RunRequest) -> list[str]:
        argv = ["docker", "run", "--rm", "--network", "none", "--memory", f"{request.memory_mb}m",
                "--memory-swap", f"{request.memory_mb}m", "--pids-limit", "1024", "--read-only",
                "--tmpfs", "/tmp", "--security-opt", "no-new-privileges", "--user", f"{DOCKER_UID}:{DOCKER_UID}",
                "-v", f"{request.workdir}:{request.workdir}", "-w", str(request.workdir)]
        if request.gpu:
            argv += ["--gpus", "all"]
        for key, value in sorted(request.env.items()):
            argv += ["-e", f"{key}={value}"]
        return argv + [self.image, "python3", *request.argv[1:]]  # the image's own interpreter

    def run(self, request: RunRequest) -> RunResult:
        return run_process(self.command(request), replace(request, uid=None, pass_fds=()), isolate_net=False)
