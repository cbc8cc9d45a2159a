"""Grading a class on a Ray cluster (`grade-class --engine ray`): a real one-machine cluster whose
every service listens on loopback only, six submissions of the demo course graded as Ray tasks,
each total equal to grading the submission alone, and a rerun that grades nothing twice; what
--engine ray says where Ray is missing, and which gradings ask Ray for a GPU."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from class_builder import cli, graded_rows, make_class, scores_alone

from autograder.classroom import engines
from autograder.classroom.grade_class import ClassOptions
from autograder.errors import GraderError

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="Ray is not installed (pip install -e .[cluster], or make setup)")
# three distinct submissions (full, partial, stub) in five layouts, and an archive cut short
STUDENTS = {"ada": ("full", "dir"), "gus": ("full", "nested"), "eli": ("full", "zip"), "ivy": ("partial_add", "dir"),
            "oz": ("stub", "tgz"), "ray": ("broken", "zip")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (a Ray head and everything it started)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def _listening(pids: list[int]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses the TCP sockets of `pids` listen on, from /proc (no tool needed)."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                inodes.update(re.findall(r"socket:\[(\d+)\]", os.readlink(fd)))
            except OSError:
                continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                raw = bytes.fromhex(cols[1].split(":")[0])
                addr = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # words are little-endian
                ip = ipaddress.ip_address(addr)
                found.append(getattr(ip, "ipv4_mapped", None) or ip)
    return found


def _stop(head: subprocess.Popen) -> None:
    """End the head and every process it started (one process group), politely first."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while _group(head.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    head.wait(timeout=10)


@pytest.fixture
def ray_cluster() -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """A Ray head on 127.0.0.1 (2 CPUs, no GPU, no dashboard, a small object store): its address,
    its process and its temp folder; shut down at the end whatever happens."""
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's unix sockets live under it
    port = _free_port()
    argv = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
            "--port", str(port), "--include-dashboard", "false", "--num-cpus", "2", "--num-gpus", "0",
            "--object-store-memory", str(80 * 2**20), "--temp-dir", str(temp), "--disable-usage-stats"]
    log = open(temp / "head.log", "w")  # noqa: SIM115 - open for the fixture's lifetime
    head = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=os.environ | {engines.RAY_ONE_MACHINE: "0"})
    try:
        deadline = time.monotonic() + 60
        while "Ray runtime started" not in (temp / "head.log").read_text():
            assert head.poll() is None and time.monotonic() < deadline, (temp / "head.log").read_text()
            time.sleep(0.2)
        yield f"127.0.0.1:{port}", head, temp
    finally:
        _stop(head)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _tasks_run(temp: Path) -> int:
    """How many gradings the cluster's workers ran: each task's start is marked in its worker's log."""
    logs = temp / "session_latest" / "logs"
    return sum(p.read_text(errors="replace").count(":task_name:_grade_in_worker") for p in logs.glob("worker-*.out"))


@needs_ray
def test_a_class_graded_as_ray_tasks_equals_grading_alone_and_a_rerun_grades_nothing_twice(
        demo_course, tmp_path, ray_cluster):
    address, head, temp = ray_cluster
    folder, out = tmp_path / "class", tmp_path / "out"
    folder.mkdir()
    make_class(demo_course, folder, STUDENTS)
    argv = cli(demo_course, "grade-class", "s00_demo", str(folder), "--out", str(out), "--engine", "ray",
               "--ray-address", address, "--sandbox", "none", "--hardware", "cpu")

    first = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "5 to grade, 0 already recorded, 1 not gradable" in first.stdout
    assert _tasks_run(temp) == 5  # graded by the cluster's workers, not by a local pool
    listening = _listening(_group(head.pid))
    assert listening and all(ip.is_loopback for ip in listening), listening

    db = out / "gradebook.sqlite"
    rows = graded_rows(db)
    with sqlite3.connect(db) as con:
        hashes = dict(con.execute("SELECT student, submission_hash FROM grades WHERE status='graded'").fetchall())
        results = dict(con.execute("SELECT student, results_path FROM grades WHERE status='graded'").fetchall())
        broken = con.execute("SELECT status FROM grades WHERE student='ray'").fetchall()
    assert set(rows) == set(STUDENTS) - {"ray"} and broken == [("broken_archive",)]
    assert all((out / results[s]).is_file() for s in results)  # written by the tasks, recorded by the driver
    alone = scores_alone(demo_course, folder, hashes, tmp_path / "alone")
    assert {s: rows[s][2] for s in rows} == {s: alone[hashes[s]] for s in rows}
    assert [rows[s][2] for s in ("ada", "gus", "eli", "oz")] == [11, 11, 11, 0] and 0 < rows["ivy"][2] < 11

    again = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 to grade, 5 already recorded, 1 not gradable" in again.stdout
    assert graded_rows(db) == rows and _tasks_run(temp) == 5  # the same rows, no task sent
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM grades").fetchone() == (len(STUDENTS),)


def test_engine_ray_without_ray_installed_says_how_to_install_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(GraderError, match=re.escape("pip install -e .[cluster]")):
        ClassOptions(engine="ray").make_engine()
    assert isinstance(ClassOptions().make_engine(), engines.LocalEngine)  # the default needs nothing more


@needs_ray
def test_a_grading_asks_ray_for_a_gpu_exactly_when_it_grades_for_a_gpu_tag():
    assert ClassOptions(engine="ray", hardware="h200").make_engine().gpus == 1
    assert ClassOptions(engine="ray", hardware="cpu").make_engine().gpus == 0
    assert ClassOptions(engine="ray", ray_address="10.0.0.5:6379").make_engine().address == "10.0.0.5:6379"
    with pytest.raises(ValueError, match="--ray-address is for --engine ray"):
        ClassOptions(ray_address="127.0.0.1:6379")
    with pytest.raises(ValueError, match="engine must be one of local, ray"):
        ClassOptions(engine="slurm")
