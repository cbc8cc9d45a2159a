"""Build the student release of weeks 1..N: the generated assignments, the grader, the course notes.

No `solutions/`, no hidden tests, no mutants: invariant 4 is checked on the folder it writes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from autograder.authoring.schedule import load_schedule
from autograder.authoring.stubs import leaked_solutions, stale_paths
from autograder.host.course_files import INSTRUCTOR_ONLY, ignore
from autograder.host.errors import GraderError
from autograder.host.repo import Course

SHIPPED = ("README.md", "Makefile", "pyproject.toml", ".gitignore", "autograder", "course", "datasets",
           "coursedata", "gpu_runners")
IGNORED = ignore(*INSTRUCTOR_ONLY)


def build_release(*, course: Course, week: int, out: Path) -> list[str]:
    """Write the release into `out` (which must not exist); returns the assignment ids shipped."""
    schedule = load_schedule(course.root / "course" / "schedule.toml", course.ids(),
                             specs={aid: course.spec(aid) for aid in course.ids()})
    ids = schedule.released_by(week)
    if not ids:
        raise GraderError(f"nothing is released by week {week}")
    if out.exists():
        raise GraderError(f"{out} already exists: choose a new folder")
    for aid in ids:
        if stale := stale_paths(course, aid):
            raise GraderError(f"{aid}: assignments/ is stale ({stale[0]}); run `make assignments` first")
    out.mkdir(parents=True)
    for name in SHIPPED:
        source = course.root / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=IGNORED)
        elif source.is_file():
            shutil.copy2(source, out / name)
    for aid in ids:
        shutil.copytree(course.assignments / aid, out / "assignments" / aid, ignore=IGNORED)
    if leaks := leaked_solutions(out / "assignments"):
        shutil.rmtree(out)
        raise GraderError(f"the release would leak: {', '.join(leaks[:5])}")
    return ids
