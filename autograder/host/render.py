"""The student's copy of an assignment's files, rendered in memory from the reference: solution
regions stripped to stubs (autograder/host/markers.py), reference answers blanked, given packages
(earlier assignments' references) added as they are. Both the grader (a student's package
completed from the stubs) and authoring (`assignments/` written and checked) use it."""

from __future__ import annotations

from pathlib import Path

from autograder.host.course_files import counts, instructor_only
from autograder.host.markers import keep_solutions, strip_answer, strip_numeric, strip_solutions
from autograder.host.repo import Course
from autograder.host.spec import AssignmentSpec
from autograder.host.written import PLACEHOLDER


def shipped_files(solution_dir: Path) -> list[Path]:
    """The files of an assignment folder a student copy holds: instructor-only files and caches left out."""
    files = []
    for path in sorted(solution_dir.rglob("*")):
        rel = path.relative_to(solution_dir)
        if not path.is_file() or instructor_only(rel) or not counts(rel):
            continue
        files.append(rel)
    return files


def render_release(solution_dir: Path, prefix: str, given: dict[Path, bytes] | None = None) -> dict[Path, bytes]:
    """The student copy of one assignment, as {relative path: content}; `given`: its given packages
    (`given_packages`), shipped as they are."""
    out: dict[Path, bytes] = {}
    counter = 0
    for rel in shipped_files(solution_dir):
        data = (solution_dir / rel).read_bytes()
        if rel.suffix == ".py":
            text = data.decode()
            text, counter = strip_solutions(text, str(solution_dir / rel), prefix, counter)
            data = text.encode()
        elif rel.suffix == ".md" and rel.parts[0] == "answers":
            data = strip_answer(data.decode(), str(solution_dir / rel), PLACEHOLDER).encode()
        elif rel.suffix == ".toml" and rel.parts[0] == "answers":
            data = strip_numeric(data.decode(), str(solution_dir / rel)).encode()
        out[rel] = data
    return out | (given or {})


def given_packages(course: Course, spec: AssignmentSpec) -> dict[Path, bytes]:
    """The packages `spec` is given ([[given]] package): each earlier assignment's reference package,
    marker lines dropped and bodies kept. Empty for a package whose solution this checkout lacks (a
    student's: there the assignment folder already holds it)."""
    out: dict[Path, bytes] = {}
    for given in spec.given_packages:
        source = course.solution_dir(given.solves)
        if source is None:
            continue
        for rel in shipped_files(source):
            if rel.parts[0] != given.package:
                continue
            data = (source / rel).read_bytes()
            if rel.suffix == ".py":
                data = keep_solutions(data.decode(), str(source / rel)).encode()
            out[rel] = data
    return out


def render_package(solution_dir: Path, packages: tuple[str, ...], prefix: str,
                   given: dict[Path, bytes] | None = None) -> dict[Path, bytes]:
    """Only the package files of an assignment, stubbed, with its given packages (what a fresh
    student starts from)."""
    return {rel: data for rel, data in render_release(solution_dir, prefix, given).items() if rel.parts[0] in packages}
