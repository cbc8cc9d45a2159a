"""Shared fixtures for the project's own tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.host.course_files import ignore
from autograder.host.repo import Course

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent
# Collected test manifests are cached by the content of everything collection reads (host/collect.py),
# so every private copy of the demo course may share one cache: a copy's first grading then skips a
# collection run another copy of the same files already made.
MANIFEST_CACHE = REPO / ".cache" / "autograder"


@pytest.fixture
def demo_course(tmp_path: Path) -> Course:
    """A private copy of the demo course (one assignment, s00_demo) with its stubs generated."""
    root = tmp_path / "course"
    shutil.copytree(FIXTURES / "demo_course", root, ignore=ignore())
    return Course(root, cache=MANIFEST_CACHE)


@pytest.fixture(scope="session")
def repo_course() -> Course:
    return Course(REPO)


def add_assignment(course: Course, assignment_id: str, files: dict[str, str]) -> Course:
    """Write solutions/<id>/ from {relative path: text} (a README is added) and generate its student copy."""
    from autograder.authoring.stubs import write_assignment

    sol = course.solutions / assignment_id
    for rel, text in {"README.md": f"# {assignment_id}\n", **files}.items():
        (sol / rel).parent.mkdir(parents=True, exist_ok=True)
        (sol / rel).write_text(text)
    write_assignment(course, assignment_id)
    return course
