from pathlib import Path

import pytest

from autograder.errors import GraderError
from autograder.sandbox import RunRequest, select_backend
from autograder.sandbox.bwrap import BwrapBackend
from autograder.sandbox.docker import DockerBackend


def _request(**kw):
    base = dict(argv=["/usr/bin/python3", "-m", "pytest", "t.py"], workdir=Path("/tmp/ag/run0"), env={"A": "1"},
                wall_s=60, memory_mb=2048, hide=(Path("/work/repo"),), expose=(Path("/"),))
    return RunRequest(**(base | kw))


def test_docker_command_isolates_network_memory_and_pids_and_passes_gpus():
    argv = DockerBackend(image="img:1").command(_request(gpu=True))
    joined = " ".join(argv)
    for part in ("--network none", "--memory 2048m", "--pids-limit 1024", "--gpus all", "--read-only",
                 "-v /tmp/ag/run0:/tmp/ag/run0", "-e A=1", "img:1 python3 -m pytest t.py"):
        assert part in joined


def test_bwrap_command_hides_the_repo_and_binds_only_the_workdir_writable():
    argv = BwrapBackend().command(_request())
    joined = " ".join(argv)
    assert "--tmpfs /work/repo" in joined and "--bind /tmp/ag/run0 /tmp/ag/run0" in joined
    assert joined.index("--tmpfs /work/repo") < joined.index("--bind /tmp/ag/run0")
    assert "--dev /dev" in joined and "--dev-bind" not in joined  # no device access without a GPU
    assert "--dev-bind /dev /dev" in " ".join(BwrapBackend().command(_request(gpu=True)))


def test_unknown_or_unusable_backends_are_clear_errors(monkeypatch):
    with pytest.raises(GraderError, match="unknown sandbox 'jail'"):
        select_backend("jail")
    monkeypatch.setattr(DockerBackend, "available", lambda self: (False, "no Docker engine answers"))
    with pytest.raises(GraderError, match="not usable here: no Docker engine answers"):
        select_backend("docker")
