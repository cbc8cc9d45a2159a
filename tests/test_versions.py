"""course/versions.toml is the one place that names each environment's software: the installed
packages, the pins, the GPU image and every perf bar agree with it."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from autograder.errors import GraderError
from autograder.host.repo import Course
from autograder.versions import TABLE, environment_here, installed, load_environments

REPO = Path(__file__).resolve().parent.parent
ENVS = load_environments(REPO)
CPU, GPU = ENVS["student-cpu"], ENVS["gpu-image-1"]


def test_this_machine_runs_the_student_cpu_environment():
    """CI and `make setup` install exactly what the table says students have."""
    assert installed() == CPU.versions()
    assert environment_here(REPO) == CPU


def test_the_pins_of_the_setup_are_the_tables():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = dict(re.match(r"([a-z_-]+)==(\S+)", d).groups() for d in deps if "==" in d)
    assert pins["triton"] == CPU.triton and pins["transformers"] == CPU.transformers
    torch_pin = re.search(r"^TORCH\s*\?=\s*torch==(\S+)", (REPO / "course/student/Makefile").read_text(), re.M)[1]
    assert CPU.torch.split("+")[0] == torch_pin


def _torch_index(path: str) -> str:
    """TORCH_INDEX as the student Makefile sets it with PATH = `path` (make run with -s, no target built)."""
    out = subprocess.run(["make", "-s", "-f", "course/student/Makefile", "--eval", "show-index: ; @echo '[$(TORCH_INDEX)]'",
                          "show-index"], cwd=REPO, env=os.environ | {"PATH": path}, capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


def test_a_machine_without_an_nvidia_driver_installs_torchs_cpu_build(tmp_path):
    """PyPI's torch for Linux is a CUDA build of several GB: with no nvidia-smi on PATH the Makefile
    adds PyTorch's CPU index (its 2.13.0+cpu wins); with one, PyPI's build is kept."""
    plain = "/usr/bin:/bin"
    assert _torch_index(plain) == "[https://download.pytorch.org/whl/cpu]"
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert _torch_index(f"{tmp_path}:{plain}") == "[]"


def test_the_gpu_image_is_built_from_the_table():
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", (REPO / "gpu_runners/Dockerfile").read_text(), re.M))
    assert args["BASE_IMAGE"] == GPU.image and args["TRANSFORMERS"] == GPU.transformers
    # pytorch/pytorch:<torch>-cuda<X.Y>-...: the image's torch and CUDA are the table's
    torch, cuda = re.match(r"pytorch/pytorch:([\d.]+)-cuda(\d+)\.(\d+)", GPU.image).group(1, 2)
    assert GPU.torch == f"{torch}+cu{cuda}0"


def test_every_perf_bar_names_the_environment_it_was_measured_in():
    course = Course(REPO)
    bars = [(aid, name, tag, bar) for aid in course.ids() for name, metric in course.spec(aid).perf.items()
            for tag, bar in metric.thresholds.items()]
    assert bars  # the course has GPU bars: a check over none would prove nothing
    for aid, name, tag, bar in bars:
        assert bar.env in ENVS, f"{aid} [perf.{name}.thresholds] {tag}: unknown environment {bar.env!r}"
        assert (ENVS[bar.env].image is None) == (tag == "cpu"), f"{aid} {name} {tag}: {bar.env} is the wrong kind"


def test_a_bar_without_its_environment_is_refused(demo_course):
    from autograder.host.spec import load_spec

    path = demo_course.solution_dir("s00_demo") / "assignment.toml"
    path.write_text(re.sub(r', env = "[^"]*"', "", path.read_text()))
    with pytest.raises(GraderError, match="env"):
        load_spec(path)


def test_a_machine_matching_no_environment_cannot_write_bars(tmp_path):
    (tmp_path / TABLE).parent.mkdir()
    (tmp_path / TABLE).write_text(
        (REPO / TABLE).read_text().replace(f'torch = "{CPU.torch}"', 'torch = "0.0.1"'))
    with pytest.raises(GraderError, match="matches no environment"):
        environment_here(tmp_path)


QUOTE = re.compile(r"\b(torch|triton|transformers) (\d+\.\d+)")


def test_versions_quoted_in_the_notes_are_those_of_an_environment():
    """A handout or stage note that says "torch 2.11" quotes the GPU image; "torch 2.13" the student
    setup; any other version is stale."""
    known = {(p, ".".join(getattr(e, p).split(".")[:2])) for e in ENVS.values() for p in ("torch", "triton", "transformers")}
    notes = [*REPO.glob("solutions/*/README.md"), *REPO.glob("course/stages/*.md"), REPO / "README.md"]
    quotes = [(path.relative_to(REPO), m.group(1), m.group(2)) for path in notes for m in QUOTE.finditer(path.read_text())]
    assert quotes
    stale = [q for q in quotes if (q[1], q[2]) not in known]
    assert not stale, stale


def test_torch_installed_without_its_build_tag_is_read_from_the_running_module():
    """Some images' torch metadata says '2.11.0' for the cu130 build; the running module says
    '2.11.0+cu130', and that is what an environment names."""
    import torch

    from autograder.versions import _torch_build

    assert _torch_build(torch.__version__.split("+")[0]) == torch.__version__
    assert _torch_build("2.11.0+cu130") == "2.11.0+cu130"  # a tagged version is taken as it is
    assert _torch_build("") == ""  # not installed stays not installed
