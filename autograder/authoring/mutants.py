"""Realistic broken variants (`solutions/<id>/mutants.toml`) graded to prove the suite catches them."""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autograder.hardware import hardware_tag
from autograder.host.course_files import ignore
from autograder.errors import GraderError
from autograder.host.grade import grade_assignment
from autograder.host.results import AssignmentResult
from autograder.host.repo import Course


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...] = ()
    gpu: bool = False


@dataclass(frozen=True)
class MutantOutcome:
    """`caught` is only ever True for a mutant graded here that lost points; a GPU mutant on a
    machine without CUDA is `graded_here=False` and not caught: nothing proved it is caught."""

    name: str
    caught: bool
    score: float
    max_score: float
    graded_here: bool


def load_mutants(solution_dir: Path) -> list[Mutant]:
    path = solution_dir / "mutants.toml"
    if not path.is_file():
        return []
    try:
        entries = tomllib.loads(path.read_text()).get("mutant", [])
        mutants = [Mutant(e["name"], e["file"], e["find"], e["replace"], tuple(e.get("tests", ())),
                          bool(e.get("gpu", False))) for e in entries]
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise GraderError(f"{path}: malformed mutant ({e})") from None
    for m in mutants:
        count = (solution_dir / m.file).read_text().count(m.find) if (solution_dir / m.file).is_file() else 0
        if count != 1:
            raise GraderError(f"{path}: mutant {m.name!r}: `find` occurs {count} times in {m.file} (needs 1)")
    return mutants


def apply_mutant(solution_dir: Path, mutant: Mutant, target: Path) -> Path:
    """Copy the reference to `target` with the mutant's replacement applied."""
    shutil.copytree(solution_dir, target, ignore=ignore("hidden"))
    path = target / mutant.file
    path.write_text(path.read_text().replace(mutant.find, mutant.replace, 1))
    return target


def grade_mutants(*, course: Course, assignment_id: str, sandbox: str = "auto",
                  say: Callable[[str], None] = print, gpu_only: bool = False,
                  names: list[str] | None = None) -> list[MutantOutcome]:
    """Grade each mutant (or those in `names`) on this machine."""
    solution_dir = course.solution_dir(assignment_id)
    if solution_dir is None:
        raise GraderError(f"mutants need solutions/{assignment_id}")
    on_gpu = hardware_tag() != "cpu"
    outcomes = []
    for mutant in load_mutants(solution_dir):
        if (gpu_only and not mutant.gpu) or (names is not None and mutant.name not in names):
            continue
        if mutant.gpu and not on_gpu:
            say(f"{mutant.name}: not run here (needs a GPU)")
            outcomes.append(MutantOutcome(mutant.name, False, 0, 0, graded_here=False))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            sub = apply_mutant(solution_dir, mutant, Path(tmp) / assignment_id)
            result = _grade(course, assignment_id, sub, sandbox, mutant.tests)
        caught = result.score < result.max_score - 1e-9
        say(f"{mutant.name}: {result.score:g}/{result.max_score:g} -> {'caught' if caught else 'SURVIVED'}")
        outcomes.append(MutantOutcome(mutant.name, caught, result.score, result.max_score, True))
    return outcomes


def _grade(course: Course, assignment_id: str, submission: Path, sandbox: str,
           tests: tuple[str, ...]) -> AssignmentResult:
    """Grade a variant up to its first failed test: a point lost there proves it caught. A variant
    that lost nothing that way (no failure, or the stop came at a test worth no points) is graded
    in full, so a survivor is always one that a complete grading lets through."""
    only = list(tests) or None
    quick = grade_assignment(course=course, assignment_id=assignment_id, submission=submission,
                             sandbox=sandbox, only_files=only, probe=False, first_failure=True)
    if quick.score < quick.max_score - 1e-9:
        return quick
    return grade_assignment(course=course, assignment_id=assignment_id, submission=submission,
                            sandbox=sandbox, only_files=only, probe=False)
