"""The docker backend: what it asks the engine for (checked without a daemon), how the HMAC key crosses
into the container, and, where an engine and an image exist, real runs."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.sandbox import RunRequest
from autograder.sandbox.docker import (
    LAUNCHER,
    SECRET_FD,
    DockerBackend,
    container_config,
    container_env,
    container_user,
    stage_fds,
)

TEST_IMAGE = os.environ.get("AUTOGRADER_TEST_IMAGE", "course-autograder:cpu")  # any image with python3 (`make cpu-image`)


def _request(workdir: Path, **kw) -> RunRequest:
    base = {"argv": ["/host/venv/bin/python", "-c", "pass"], "workdir": workdir, "env": {"A": "1"}, "wall_s": 60,
            "memory_mb": 1024}
    return RunRequest(**(base | kw))


def test_container_runs_as_the_run_uid_as_root_else_as_the_invoking_user(tmp_path):
    assert container_user(_request(tmp_path, uid=123456)) == "123456:123456"
    assert container_user(_request(tmp_path)) == f"{os.getuid()}:{os.getgid()}"


def test_container_keeps_the_images_path_and_pythonpath_not_the_hosts(tmp_path):
    env = {"PATH": "/host/bin", "PYTHONPATH": f"{tmp_path}{os.pathsep}/work/grader", "HOME": str(tmp_path / "home")}
    inside = container_env(_request(tmp_path, env=env), ["PATH=/opt/conda/bin:/usr/bin", "PYTHONPATH=/opt/course"])
    assert "PATH" not in inside  # the image's PATH applies
    assert inside["PYTHONPATH"] == f"{tmp_path}{os.pathsep}/opt/course" and inside["HOME"] == str(tmp_path / "home")


def test_the_key_crosses_as_a_private_file_never_in_argv_or_environment(tmp_path):
    key = b"\x00\xff\xe9\n" + secrets.token_bytes(28)  # NUL, non-UTF-8 and newline bytes must survive
    request = _request(tmp_path, argv=["/host/python", "-m", "pytest"], secret=key, secret_flag="--ag-key-fd")
    fds = stage_fds(request, owner=None)
    (staged,) = fds
    assert staged.number == SECRET_FD and staged.path.read_bytes() == key
    assert staged.path.stat().st_mode & 0o777 == 0o400
    config = container_config(request, "img:1", [], fds, "autograder-x")
    assert config["command"][-2:] == ["--ag-key-fd", str(SECRET_FD)]
    visible = repr(config["command"]) + repr(config["environment"]) + repr(request)
    assert key.hex() not in visible and repr(key) not in visible and "AUTOGRADER_KEY" not in visible


def test_the_launcher_reopens_the_key_at_its_fd_number_and_deletes_the_file(tmp_path):
    key = b"\x00\xff" + secrets.token_bytes(30)
    (staged,) = stage_fds(_request(tmp_path, secret=key, secret_flag="--key-fd"), owner=None)
    number = staged.number
    child = f"import os, sys; sys.stdout.buffer.write(os.fdopen({number}, 'rb').read())"
    run = subprocess.run([sys.executable, "-c", LAUNCHER, f"{number}={staged.path}", "0", sys.executable, "-c", child],
                         capture_output=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout == key and not staged.path.exists()


def test_the_launcher_bounds_the_address_space_of_a_cpu_run_and_not_of_a_gpu_run(tmp_path):
    pytest.importorskip("docker", reason="the docker SDK (extra 'docker') builds the GPU device request")
    cpu = container_config(_request(tmp_path, memory_mb=1024), "img:1", [], [], "autograder-x")["command"]
    gpu = container_config(_request(tmp_path, gpu=True), "img:1", [], [], "autograder-x")["command"]
    assert cpu[4] == str(1024 << 20) and gpu[4] == "0"
    child = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])"
    run = subprocess.run([sys.executable, "-c", LAUNCHER, "", str(1 << 33), sys.executable, "-c", child],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0 and int(run.stdout) == 1 << 33, run.stderr


class _Container:
    def __init__(self, **config) -> None:
        self.config, self.status, self.killed, self.removed = config, "running", False, False

    def reload(self) -> None:
        if self.killed:
            self.status = "exited"

    def kill(self) -> None:
        self.killed = True

    def wait(self) -> dict:
        return {"StatusCode": 137 if self.killed else 0}

    def logs(self, **kw) -> bytes:
        return b"still running\n"

    def remove(self, force: bool = False) -> None:
        self.removed = force


class _Client:
    """Just enough of the Docker SDK's client for the backend: one container that never ends."""

    def __init__(self) -> None:
        self.started: list[_Container] = []
        self.images = self
        self.containers = self

    def get(self, image: str):
        return type("Image", (), {"attrs": {"Config": {"Env": ["PATH=/usr/bin"]}}})()

    def run(self, **config) -> _Container:
        self.started.append(_Container(**config))
        return self.started[-1]


def test_a_run_past_its_wall_limit_kills_and_removes_its_named_container(tmp_path):
    client = _Client()
    result = DockerBackend(image="img:1", client=client).run(_request(tmp_path, wall_s=0.5))
    (container,) = client.started
    assert result.timed_out and "wall limit" in result.describe()
    assert container.killed and container.removed and container.config["name"].startswith("autograder-")


def _engine() -> DockerBackend:
    backend = DockerBackend(image=TEST_IMAGE)
    ok, why = backend.available()
    if not ok:
        pytest.skip(f"no Docker engine with image {TEST_IMAGE} here: {why}")
    return backend


def test_a_real_container_gets_the_key_and_writes_results_as_the_run_user(tmp_path):
    """The invoking user's uid, or as root a fresh uid the work dir was handed to (never root)."""
    backend = _engine()
    tmp_path.chmod(0o755)
    key = b"\x00\xff" + secrets.token_bytes(30)
    code = "import os, sys; open('out.bin', 'wb').write(os.fdopen(int(sys.argv[2]), 'rb').read())"
    result = backend.run(_request(tmp_path, argv=["python", "-c", code], secret=key, secret_flag="--key-fd"))
    assert result.returncode == 0, result.output
    owner = (tmp_path / "out.bin").stat().st_uid
    assert (tmp_path / "out.bin").read_bytes() == key
    assert owner == os.getuid() if os.getuid() else owner != 0


def test_a_real_container_past_its_wall_limit_is_killed_and_gone(tmp_path):
    backend = _engine()
    result = backend.run(_request(tmp_path, argv=["python", "-c", "while True: pass"], wall_s=3))
    assert result.timed_out
    from test_docker_grading import containers_left

    assert not containers_left([tmp_path])
