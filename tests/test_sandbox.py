import sys
from pathlib import Path

import pytest

from autograder.errors import GraderError
from autograder.sandbox import RunRequest, select_backend
from autograder.sandbox.bwrap import BwrapBackend
from autograder.sandbox.docker import DockerBackend, container_config


def _request(**kw):
    base = dict(argv=["/usr/bin/python3", "-m", "pytest", "t.py"], workdir=Path("/tmp/ag/run0"), env={"A": "1"},
                wall_s=60, memory_mb=2048, hide=(Path("/work/repo"),), expose=(Path("/"),))
    return RunRequest(**(base | kw))


def test_docker_container_isolates_network_memory_and_pids_and_passes_gpus():
    pytest.importorskip("docker", reason="the docker SDK (extra 'docker') builds the GPU device request")
    config = container_config(_request(gpu=True), "img:1", [], [], "autograder-x")
    assert config["network_mode"] == "none" and config["mem_limit"] == "2048m" and config["pids_limit"] == 1024
    assert config["read_only"] and config["cap_drop"] == ["ALL"] and config["name"] == "autograder-x"
    assert config["volumes"] == {"/tmp/ag/run0": {"bind": "/tmp/ag/run0", "mode": "rw"}}
    assert config["environment"] == {"A": "1"} and config["command"][-3:] == ["-m", "pytest", "t.py"]
    assert [r.capabilities for r in config["device_requests"]] == [[["gpu"]]]
    ranks = container_config(_request(processes=5), "img:1", [], [], "autograder-y")  # a test file of world 4
    assert ranks["mem_limit"] == "10240m" and ranks["memswap_limit"] == "10240m" and ranks["pids_limit"] == 5120


def test_bwrap_command_binds_only_what_a_grading_needs_and_only_the_workdir_writable():
    grader = Path(__file__).resolve().parents[1] / "autograder"
    argv = BwrapBackend().command(_request(expose=(grader,), hide=(grader.parent,)))
    joined = " ".join(argv)
    binds = [argv[i + 1] for i, a in enumerate(argv) if a in ("--ro-bind", "--bind", "--dev-bind")]
    assert "/" not in binds and "/etc" not in binds and "/home" not in binds, binds  # never the whole host
    assert f"--ro-bind {grader} {grader}" in joined and f"--ro-bind {sys.prefix} {sys.prefix}" in joined
    assert "--ro-bind /usr /usr" in joined and "--ro-bind /etc/ld.so.cache /etc/ld.so.cache" in joined
    assert [b for b in binds if b not in ("/dev",) and not b.startswith(("/usr", "/etc/", str(grader), "/tmp/ag/run0"))
            and not any(Path(b) == Path(p).resolve() for p in (sys.prefix, sys.base_prefix))] == []
    assert joined.index(f"--ro-bind {grader}") < joined.index("--bind /tmp/ag/run0 /tmp/ag/run0")
    assert "--dev /dev" in joined and "--dev-bind" not in joined  # no device access without a GPU
    assert "--dev-bind /dev /dev" in " ".join(BwrapBackend().command(_request(gpu=True)))


@pytest.mark.filterwarnings("ignore:the Python interpreter is not reachable")
@pytest.mark.parametrize("name", ["none", "bwrap"])
def test_a_backend_hands_the_secret_through_a_descriptor_named_in_argv_never_the_text(name, tmp_path):
    backend = select_backend(name)
    secret = b"\x00\xffkey\n" + bytes(range(24))
    reader = ("import os, sys; argv = open('/proc/self/cmdline', 'rb').read() + open('/proc/self/environ', 'rb').read()\n"
              "data = os.read(int(sys.argv[-1]), 100)\n"
              "open('got', 'wb').write(data); open('seen', 'wb').write(argv)")
    tmp_path.chmod(0o777)
    run = backend.run(_request(argv=[sys.executable, "-c", reader], workdir=tmp_path, hide=(), expose=(),
                               secret=secret, secret_flag="--key-fd"))
    assert run.returncode == 0, run.output
    assert (tmp_path / "got").read_bytes() == secret
    assert secret not in (tmp_path / "seen").read_bytes() and b"--key-fd" in (tmp_path / "seen").read_bytes()
    assert "key" not in repr(_request(secret=secret))  # nor in a request's repr (logs, tracebacks)


def test_unknown_or_unusable_backends_are_clear_errors(monkeypatch):
    with pytest.raises(GraderError, match="unknown sandbox 'jail'"):
        select_backend("jail")
    monkeypatch.setattr(DockerBackend, "available", lambda self: (False, "no Docker engine answers"))
    with pytest.raises(GraderError, match="not usable here: no Docker engine answers"):
        select_backend("docker")
