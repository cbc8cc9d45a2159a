"""Gradescope: build the autograder zip of one assignment, and grade inside Gradescope's image.

The zip holds `setup.sh` (run once as root when Gradescope builds the image: a Python >= 3.11 and
the course's packages at the versions this checkout runs, in /autograder/venv), `run_autograder`
(run per submission), the engine (autograder/, coursedata/, datasets/ when the tests load them)
and the assignment as grading needs it: the student copy (stub, public tests, spec) plus the
hidden tests, and the reference of each given package. The reference of the assignment itself
never ships: a submission graded without a working sandbox could read it.

`run_autograder` copies /autograder/submission, finds the package at any depth, grades it with
the course's grader and writes /autograder/results/results.json: tests this CPU worker cannot
grade are shown as such (no status, no points), never as failures. A grading the grader could not
finish writes no results at all, so Gradescope reports a failed autograder run, not a zero.
The root is $AUTOGRADER_ROOT (default /autograder), so the package can be tried anywhere.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import re
import shutil
import tempfile
import tomllib
import zipfile
from pathlib import Path

from autograder.classroom.discover import Entry, locate
from autograder.errors import GraderError
from autograder.host import atomic, report
from autograder.host.course_files import course_files
from autograder.host.fingerprint import grader_version, tree_hash
from autograder.host.repo import GRADER_ROOT
from autograder.host.render import render_release
from autograder.host.repo import Course
from autograder.host.submission import grade_submission, write_results

TORCH_INDEX = "https://download.pytorch.org/whl/cpu"  # Gradescope's workers have no GPU: the CPU build
ENGINE = ("autograder", "coursedata")
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so the same tree makes the same zip

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (Ubuntu with Python 3):
# a Python >= 3.11 and the course's pinned packages go to /autograder/venv.
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || true
python_ok() {{ command -v "$1" >/dev/null 2>&1 && "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; }}
PY=""
for candidate in python3.13 python3.12 python3.11 python3; do
    if python_ok "$candidate"; then PY="$candidate"; break; fi
done
if [ -z "$PY" ]; then  # Ubuntu 22.04 has Python 3.10; its archive has python3.11
    apt-get install -y python3.11 python3.11-venv
    PY=python3.11
fi
if ! "$PY" -m venv --clear /autograder/venv; then  # Ubuntu splits venv into its own package
    apt-get install -y "$("$PY" -c 'import sys; print("python%d.%d-venv" % sys.version_info[:2])')"
    "$PY" -m venv --clear /autograder/venv
fi
apt-get install -y bubblewrap || echo "no bubblewrap: submissions run with rlimits only"
/autograder/venv/bin/python -m pip install --upgrade pip
/autograder/venv/bin/python -m pip install --index-url {torch_index} "{torch}"
/autograder/venv/bin/python -m pip install -r requirements.txt
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: it grades /autograder/submission and writes
# /autograder/results/results.json. AUTOGRADER_ROOT and AUTOGRADER_PYTHON let it run elsewhere.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PY="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
cd "$ROOT/source"
export PYTHONPATH="$ROOT/source" COURSE_ROOT="$ROOT/source"
exec "$PY" -m autograder gradescope-run {assignment} --autograder-root "$ROOT"
"""


def pinned_requirements(grader_root: Path = GRADER_ROOT) -> tuple[str, list[str]]:
    """(torch pin, every other dependency of pyproject.toml pinned to the version installed here)."""
    deps = tomllib.loads((grader_root / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = []
    for dep in deps:
        name = re.match(r"[A-Za-z0-9_.-]+", dep).group(0)  # type: ignore[union-attr]
        try:
            version = importlib.metadata.version(name).split("+")[0]  # 2.13.0+cpu: the index says cpu
        except importlib.metadata.PackageNotFoundError:
            raise GraderError(f"{name} is not installed here: run `make setup` before building the zip") from None
        pins.append(f"{name}=={version}")
    torch = next((p for p in pins if p.startswith("torch==")), "torch")
    return torch, pins


def needs_datasets(master: Path) -> bool:
    """Whether the assignment's code or tests load the course data (`coursedata`)."""
    return any("coursedata" in (master / rel).read_text(errors="replace")
               for rel in course_files(master) if rel.suffix == ".py")


def _assignment_files(course: Course, assignment_id: str) -> dict[str, bytes]:
    """solutions/<id>/ as it ships: the rendered student copy plus the hidden tests; and each given
    package's reference (with its spec, which marks the folder as an assignment)."""
    spec = course.spec(assignment_id)
    master = course.master_dir(assignment_id)
    base = f"solutions/{assignment_id}"
    files = {f"{base}/{rel}": data for rel, data in render_release(master, spec.task_prefix).items()}
    files |= {f"{base}/{rel}": (master / rel).read_bytes() for rel in course_files(master) if rel.parts[0] == "hidden"}
    for given in spec.given_packages:
        source = course.solution_dir(given.solves)
        if source is None:
            raise GraderError(f"{assignment_id} is given {given.package} from {given.solves}, "
                              f"whose solution this checkout lacks")
        files[f"solutions/{given.solves}/assignment.toml"] = (source / "assignment.toml").read_bytes()
        files |= {f"solutions/{given.solves}/{rel}": (source / rel).read_bytes() for rel in course_files(source)
                  if rel.parts[0] == given.package}
    return files


def _engine_files(datasets: bool) -> dict[str, bytes]:
    files = {}
    for name in ENGINE + (("datasets",) if datasets else ()):
        if (GRADER_ROOT / name).is_dir():
            files |= {f"{name}/{rel}": (GRADER_ROOT / name / rel).read_bytes() for rel in course_files(GRADER_ROOT / name)}
    return files


def build_zip(*, course: Course, assignment_id: str, out: Path, datasets: bool | None = None) -> Path:
    """Write the Gradescope autograder zip of `assignment_id` to `out`; `datasets`: ship datasets/
    (default: when the assignment loads course data)."""
    master = course.master_dir(assignment_id)
    torch, pins = pinned_requirements()
    files = _engine_files(needs_datasets(master) if datasets is None else datasets)
    files |= _assignment_files(course, assignment_id)
    files["requirements.txt"] = ("\n".join(pins) + "\n").encode()
    files["grader_version.txt"] = f"{grader_version(course, assignment_id)}\n".encode()
    scripts = {"setup.sh": SETUP_SH.format(torch_index=TORCH_INDEX, torch=torch),
               "run_autograder": RUN_AUTOGRADER.format(assignment=assignment_id)}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in scripts.items():
            _add(zf, name, text.encode(), 0o755)
        for name in sorted(files):
            _add(zf, name, files[name], 0o644)
    atomic.write_bytes(out, buf.getvalue())
    return out


def _add(zf: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, ZIP_TIME)
    info.external_attr = (0o100000 | mode) << 16  # a regular file with these permissions (Unix)
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def _not_gradable(course: Course, assignment_id: str, copy: Path, problem: str, detail: str) -> dict:
    """The results of a submission with no gradable package: the student's outcome (a zero that says
    why; they may resubmit), not a grader failure."""
    package = course.spec(assignment_id).package
    meta = {"submission_hash": tree_hash(copy), "grader_version": grader_version(course, assignment_id),
            "hardware": "none"}
    return {"score": 0.0, "output": f"not graded: {detail}. Submit the folder {package}/ (with its __init__.py), "
            "alone or in one folder.", "visibility": "visible", "stdout_visibility": "hidden", "tests": [],
            "extra_data": {"autograder": {"assignments": {assignment_id: meta}, "problem": problem}}}


def run_autograder(*, root: Path, assignment_id: str, sandbox: str = "auto") -> dict:
    """Grade `root`/submission into `root`/results/results.json (Gradescope's layout); the results."""
    course = Course(root / "source")
    results_path = root / "results" / "results.json"
    work = Path(tempfile.mkdtemp(prefix="gradescope-"))
    try:
        copy = work / "submission"
        shutil.copytree(root / "submission", copy, symlinks=True)  # grading never writes to Gradescope's copy
        found = locate(Entry("submission", copy), course.spec(assignment_id).package, work / "unpacked")
        if found.root is None:
            data = _not_gradable(course, assignment_id, copy, found.problem, found.detail)
            atomic.write_text(results_path, json.dumps(data, indent=1))
            return data
        grading = grade_submission(course, assignment_id, submission=found.root, sandbox=sandbox)
        write_results(results_path, [grading], upload=True)
        print(report.summary_line(grading.result))
        return json.loads(results_path.read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)
