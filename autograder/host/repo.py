"""Where things live in the course tree: solutions, generated assignments, the schedule."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from autograder.errors import GraderError
from autograder.host.spec import AssignmentSpec, load_spec

GRADER_ROOT = Path(__file__).resolve().parents[2]  # the checkout holding autograder/ (the course may be elsewhere)


def find_root(start: Path | None = None) -> Path:
    """The course root: $COURSE_ROOT, else the nearest parent holding assignments/ or solutions/."""
    if env := os.environ.get("COURSE_ROOT"):
        return Path(env).resolve()
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "assignments").is_dir() or (candidate / "solutions").is_dir():
            return candidate
    return Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Course:
    root: Path
    # where collected test manifests are cached (by content); a course staged in a temporary folder
    # (a notebook's grading) points it at its real course's, so the cache outlives the folder
    cache: Path | None = None

    @property
    def cache_dir(self) -> Path:
        return self.cache or self.root / ".cache" / "autograder"

    @property
    def solutions(self) -> Path:
        return self.root / "solutions"

    @property
    def assignments(self) -> Path:
        return self.root / "assignments"

    @property
    def has_solutions(self) -> bool:
        return self.solutions.is_dir()

    def ids(self) -> list[str]:
        """Every assignment id, from solutions/ when present (instructor tree), else assignments/."""
        base = self.solutions if self.has_solutions else self.assignments
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if (p / "assignment.toml").is_file())

    def master_dir(self, assignment_id: str) -> Path:
        """Where the trusted tests come from: solutions/<id> if present, else assignments/<id>."""
        for base in (self.solutions, self.assignments):
            if (base / assignment_id / "assignment.toml").is_file():
                return base / assignment_id
        known = ", ".join(self.ids()) or "none"
        raise GraderError(f"unknown assignment {assignment_id!r}; known: {known}")

    def spec(self, assignment_id: str) -> AssignmentSpec:
        return load_spec(self.master_dir(assignment_id) / "assignment.toml")

    def solution_dir(self, assignment_id: str) -> Path | None:
        path = self.solutions / assignment_id
        return path if (path / "assignment.toml").is_file() else None

    def student_dir(self, assignment_id: str) -> Path:
        return self.assignments / assignment_id
