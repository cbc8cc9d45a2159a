"""Which files of a course tree count: one rule for staging, stubs, releases, mutants, manifests and
the course's own tests. Caches of Python, pytest, Hypothesis and notebooks never count."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from pathlib import Path

CACHE_PARTS = frozenset({"__pycache__", ".pytest_cache", ".hypothesis", ".ipynb_checkpoints", ".cache"})
CACHE_SUFFIXES = frozenset({".pyc", ".pyo"})
INSTRUCTOR_ONLY = ("hidden", "rubrics", "mutants.toml", "mutants.lock", "mutation.toml", "tasks.toml")  # never shipped to students, never staged as given files


def counts(rel: Path) -> bool:
    """Whether the file at `rel` (relative to a course tree) is a course file, not a cache."""
    return not (CACHE_PARTS & set(rel.parts)) and rel.suffix not in CACHE_SUFFIXES


ANSWER_FORMS = (".md", ".toml")  # what answers/ ships: the questions, and the numbers to fill in


def instructor_only(rel: Path) -> bool:
    """Whether `rel` (relative to an assignment) is a hidden test, a rubric, a list of broken
    variants, or a data file of the reference's own run under answers/ (a student's analysis
    starts from their own run, so the reference's measurements never ship)."""
    data_of_reference = len(rel.parts) > 1 and rel.parts[0] == "answers" and rel.suffix not in ANSWER_FORMS
    return data_of_reference or any(part in INSTRUCTOR_ONLY for part in rel.parts)


def course_files(root: Path) -> list[Path]:
    """Relative paths of the course files under `root`, sorted."""
    return [p.relative_to(root) for p in sorted(root.rglob("*")) if p.is_file() and counts(p.relative_to(root))]


def ignore(*extra: str) -> Callable[[str, list[str]], set[str]]:
    """A `shutil.copytree` ignore function: caches, plus names matching `extra` patterns."""

    def ignored(_folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in CACHE_PARTS or Path(n).suffix in CACHE_SUFFIXES
                or any(fnmatch.fnmatch(n, pattern) for pattern in extra)}

    return ignored
