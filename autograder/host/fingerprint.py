"""What identifies a grading: a hash of the submission and a version of the grader.

A grade is reusable only while both stay the same: the gradebook keys its records on them, and
`autograder merge` refuses to join two results that differ in either.

- The submission hash covers exactly what grading reads from a submission folder: the files a
  student may edit (the spec's `editable` globs), the packages (own and given) and the written
  answers; caches, symbolic links' targets and everything else are left out, so the same work
  hashes the same whether it came as a folder, a zip or one folder deeper.
- The grader version covers the engine's source (autograder/, coursedata/) and the assignment as
  grading sees it: the rendered student copy (stub and given packages) plus the hidden tests. It is
  computed from the rendered form so that a Gradescope package, which ships the stub instead of
  the reference, has the same version as the instructor's tree.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable
from pathlib import Path

import autograder
from autograder.host.course_files import counts, course_files
from autograder.host.repo import GRADER_ROOT
from autograder.host.render import given_packages, render_release
from autograder.host.repo import Course
from autograder.host.spec import AssignmentSpec
from autograder.host.stage import read_no_follow, walk_no_links

ENGINE_DIRS = ("autograder", "coursedata")
HIDDEN = "hidden"


def _digest(items: Iterable[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for name, data in sorted(items):
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def counted(rel: Path, spec: AssignmentSpec) -> bool:
    """Whether grading reads `rel` (relative to a submission root)."""
    return (rel.parts[0] in spec.packages or rel.parts[0] == "answers"
            or any(fnmatch.fnmatch(str(rel), pattern) for pattern in spec.editable))


def submission_hash(source_dir: Path, spec: AssignmentSpec) -> str:
    """sha256 of the files grading reads from `source_dir` (a link counts by its name only)."""
    files, links = walk_no_links(source_dir)
    items = [(str(rel), read_no_follow(source_dir / rel)) for rel in files if counts(rel) and counted(rel, spec)]
    items += [(f"{rel} -> link", b"") for rel in links if counted(rel, spec)]
    return _digest(items)


def tree_hash(folder: Path) -> str:
    """sha256 of every regular file under `folder` (or of the file itself): what identifies a
    submission that could not be read as a package (a broken archive, an ambiguous layout)."""
    if folder.is_file():
        return _digest([(folder.name, folder.read_bytes())])
    files, links = walk_no_links(folder)
    return _digest([(str(rel), read_no_follow(folder / rel)) for rel in files] + [(f"{rel} -> link", b"") for rel in links])


def _engine_files(grader_root: Path) -> list[tuple[str, bytes]]:
    items = []
    for name in ENGINE_DIRS:
        base = grader_root / name
        items += [(f"{name}/{p.relative_to(base)}", p.read_bytes()) for p in sorted(base.rglob("*.py"))
                  if base.is_dir() and counts(p.relative_to(base))]
    return items


def grader_version(course: Course, assignment_id: str, *, grader_root: Path = GRADER_ROOT) -> str:
    """`<package version>+<12 hex digits>`: changes when the engine or what the assignment's
    grading uses changes (tests, hidden tests, spec, stub, given packages); not when a handout does."""
    spec = course.spec(assignment_id)
    master = course.master_dir(assignment_id)
    rendered = render_release(master, spec.task_prefix, given_packages(course, spec))
    items = [(f"assignment/{rel}", data) for rel, data in rendered.items() if str(rel) != "README.md"]
    items += [(f"assignment/{rel}", (master / rel).read_bytes()) for rel in course_files(master)
              if rel.parts[0] == HIDDEN]
    return f"{autograder.__version__}+{_digest(items + _engine_files(grader_root))[:12]}"
