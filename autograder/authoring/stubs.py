"""Generate `assignments/<id>/` from `solutions/<id>/`, and tell whether it is up to date.

Copied: everything but instructor-only files (`hidden/`, rubrics, broken variants) and caches. Python files have their
solution regions stripped (see `autograder.host.markers`), written answers (`answers/*.md`) their reference answer,
numeric answers (`answers/*.toml`) their reference values (each becomes nan). The generator works in memory, so the same function
serves writing the tree and checking that the committed tree is current.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from autograder.host.course_files import instructor_only
from autograder.host.markers import MD_MARKER, Region, find_regions, has_markers
from autograder.host.render import given_packages, render_release, shipped_files
from autograder.host.repo import Course


@dataclass(frozen=True)
class Task:
    """One task id of an assignment and the solution region of the reference it stands for."""

    id: str  # "s05.3"
    file: str  # relative to the assignment, e.g. "kvcache/block_manager.py"
    region: Region

    @property
    def function(self) -> str:
        return self.region.function


def solution_tasks(solution_dir: Path, prefix: str) -> list[Task]:
    """Every task of the reference, numbered as `render_release` numbers its stubs: regions in
    file order over the shipped Python files, counting on from one file to the next."""
    tasks: list[Task] = []
    for rel in shipped_files(solution_dir):
        if rel.suffix == ".py":
            for region in find_regions((solution_dir / rel).read_text(), str(solution_dir / rel)):
                tasks.append(Task(f"{prefix}.{len(tasks) + 1}", rel.as_posix(), region))
    return tasks


STUB_TASK = re.compile(r'raise NotImplementedError\("(?P<id>[\w-]+\.\d+): (?P<function>[\w.]+)"\)')


def stub_task_ids(release: dict[Path, bytes]) -> list[tuple[str, str]]:
    """(task id, function) of every stub in a rendered release, in file order: what a student greps."""
    return [(m["id"], m["function"]) for rel, data in sorted(release.items()) if rel.suffix == ".py"
            for m in STUB_TASK.finditer(data.decode())]


def stale_paths(course: Course, assignment_id: str) -> list[str]:
    """Paths under assignments/<id> that differ from what the generator makes (empty: in sync)."""
    spec = course.spec(assignment_id)
    solution = course.solution_dir(assignment_id)
    if solution is None:
        return []
    expected = render_release(solution, spec.task_prefix, given_packages(course, spec))
    target = course.student_dir(assignment_id)
    actual = {rel for rel in shipped_files(target)} if target.is_dir() else set()
    problems = [f"missing {rel}" for rel in sorted(expected.keys() - actual)]
    problems += [f"extra {rel}" for rel in sorted(actual - expected.keys())]
    for rel in sorted(expected.keys() & actual):
        if (target / rel).read_bytes() != expected[rel]:
            problems.append(f"differs {rel}")
    return problems


def write_assignment(course: Course, assignment_id: str) -> int:
    """Regenerate assignments/<id> from solutions/<id>; returns the number of files written."""
    spec = course.spec(assignment_id)
    solution = course.solution_dir(assignment_id)
    if solution is None:
        return 0
    files = render_release(solution, spec.task_prefix, given_packages(course, spec))
    target = course.student_dir(assignment_id)
    if target.exists():
        shutil.rmtree(target)
    for rel, data in files.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(data)
    return len(files)


def write_all(course: Course) -> dict[str, int]:
    """Regenerate every assignment and remove generated folders whose solution is gone."""
    written = {aid: write_assignment(course, aid) for aid in course.ids()}
    if course.assignments.is_dir():
        for folder in course.assignments.iterdir():
            if folder.is_dir() and folder.name not in written:
                shutil.rmtree(folder)
    return written


def leaked_solutions(tree: Path) -> list[str]:
    """Files of a student tree that carry solution markers or hidden tests (must be empty)."""
    leaks = []
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree)
        if instructor_only(rel):
            leaks.append(f"{rel}: instructor-only file")
        elif path.suffix == ".py" and path.is_file() and has_markers(path.read_text()):
            leaks.append(f"{rel}: contains solution markers")
        elif path.suffix == ".md" and path.is_file() and MD_MARKER.search(path.read_text()):
            leaks.append(f"{rel}: contains a written answer's solution markers")
        elif path.suffix == ".toml" and path.is_file() and has_markers(path.read_text()):
            leaks.append(f"{rel}: contains a numeric answer's solution markers")
    return leaks
