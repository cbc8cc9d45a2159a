"""The course invariants of DESIGN.md, checked for every assignment present.

1. The reference solution scores every CPU-gradable point.  2. The untouched stub scores zero.
3. assignments/ equals what the generator makes, and each handout's grading section equals what
   the spec and the tests give.  4. No solution body or hidden test in a release; a file or package
   that answers an earlier exercise ([[given]]) ships whole, and only after that exercise is due.
5. (Grading always yields a complete result: the project's adversarial tests check that.)
A notebook exercise (solutions/notebooks/) keeps 1, 2 and 4 too: its source notebook earns every
point, and the notebook nbgrader releases earns none and holds no solution.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from autograder.authoring.handout import current_handout
from autograder.authoring.stubs import leaked_solutions, stale_paths
from autograder.errors import GraderError
from autograder.host.grade import grade_assignment
from autograder.host.markers import has_markers
from autograder.host.repo import Course
from autograder.host.results import HELD, MANUAL

Say = Callable[[str], None]


def check_sync(course: Course, aid: str) -> list[str]:
    problems = []
    if stale := stale_paths(course, aid):
        problems.append(f"{aid}: assignments/ is stale ({', '.join(stale[:5])}); run `make assignments`")
    if course.student_dir(aid).is_dir() and (leaks := leaked_solutions(course.student_dir(aid))):
        problems.append(f"{aid}: the student copy leaks {', '.join(leaks[:5])}")
    return problems


def check_given(course: Course, aid: str) -> list[str]:
    """Each [[given]] file exists and has no solution region (it ships whole; that the student copy
    equals it is check_sync's business, as for every file). A given package is the package of the
    assignment it solves, and lives only there (one source of truth: never a copy in this one)."""
    problems = []
    for given in course.spec(aid).given:
        if given.package:
            problems += _given_package_problems(course, aid, given.package, given.solves)
            continue
        master = course.master_dir(aid) / given.file
        if not master.is_file():
            problems.append(f"{aid}: [[given]] {given.file} does not exist")
        elif has_markers(master.read_text()):
            problems.append(f"{aid}: [[given]] {given.file} has a solution region; a given file ships whole")
    return problems


def _given_package_problems(course: Course, aid: str, package: str, solves: str) -> list[str]:
    if solves not in course.ids():
        return [f"{aid}: [[given]] package {package} solves {solves}, which this course does not have"]
    if course.spec(solves).package != package:
        return [(f"{aid}: [[given]] package {package} is not the package of {solves} "
                 f"({course.spec(solves).package!r})")]
    if (solution := course.solution_dir(aid)) is not None and (solution / package).exists():
        return [(f"{aid}: solutions/{aid}/{package} copies the given package: it ships from "
                 f"solutions/{solves}/{package}; delete the copy")]
    return []


def check_mutants(course: Course, aid: str) -> list[str]:
    """mutants.toml reads, and each mutant's `find` text occurs exactly once in its file (a changed
    reference or answer file silently breaks the broken variants that patch it)."""
    from autograder.authoring.mutants import load_mutants
    from autograder.errors import GraderError

    if (solution := course.solution_dir(aid)) is None:
        return []
    try:
        load_mutants(solution)
    except GraderError as e:
        return [f"{aid}: {e}"]
    return []


def check_records(course: Course, aid: str) -> list[str]:
    """The measured records are current: tasks.toml (which public tests reach each task) and the
    broken variants' lock. Both fingerprint the files they were measured on, so a changed docstring
    or test shows here before `make test` finds it."""
    from autograder.authoring import task_record
    from autograder.authoring.mutants import load_mutants
    from autograder.authoring.variant_record import stale_reason
    from autograder.errors import GraderError

    if course.solution_dir(aid) is None:
        return []
    found = task_record.check(course, aid)
    try:
        names = [m.name for m in load_mutants(course.solution_dir(aid)) if not m.gpu]
    except GraderError:
        return found  # check_mutants names it
    if names and (why := stale_reason(course, aid, names)):
        found.append(f"{aid}: mutants.lock: {why}; run `make variants A={aid}`")
    return found


def check_schedule(course: Course) -> list[str]:
    """The schedule is valid and releases no given file before the exercise it answers is due."""
    from autograder.authoring.schedule import load_schedule
    from autograder.errors import GraderError

    path = course.root / "course" / "schedule.toml"
    if not path.is_file():
        return []
    try:
        load_schedule(path, course.ids(), specs={aid: course.spec(aid) for aid in course.ids()})
    except GraderError as e:
        return [str(e)]
    return []


def check_handout(course: Course, aid: str) -> list[str]:
    _path, text, regenerated = current_handout(course, aid)
    found = []
    if text != regenerated:
        found.append(f"{aid}: the handout's grading section disagrees with assignment.toml and the tests; "
                     "run `python -m autograder handouts` (then `make assignments`)")
    return found + _unused_tolerances(course, aid)


def _unused_tolerances(course: Course, aid: str) -> list[str]:
    """A tolerance the handout prints must be one a test compares at (its quoted name in a test)."""
    master = course.master_dir(aid)
    sources = "".join(p.read_text() for d in ("tests", "hidden", ".") for p in sorted((master / d).glob("*.py")))
    return [f"{aid}: [tolerances] {name!r} is printed in the handout but no test uses it"
            for name in course.spec(aid).tolerances if f'"{name}"' not in sources]


def check_reference(course: Course, aid: str, sandbox: str, hardware: str | None = None) -> list[str]:
    result = grade_assignment(course=course, assignment_id=aid, solution=True, sandbox=sandbox, hardware=hardware)
    # a held test is not earned: the reference must pass outright
    bad = [t for t in result.tests if (t.graded or t.status == HELD) and t.score < t.test.points - 1e-9]
    if result.max_score == 0:
        return [f"{aid}: the reference earned no gradable point on {result.hardware}"]
    return [f"{aid}: reference loses points on {t.test.nodeid}: {(t.reason or t.output or t.status)[-600:]}"
            for t in bad]


def check_stub(course: Course, aid: str, sandbox: str, hardware: str | None = None) -> list[str]:
    result = grade_assignment(course=course, assignment_id=aid, sandbox=sandbox, hardware=hardware)
    if not result.tests:
        return [f"{aid}: the stub was graded on no test at all"]
    problems = [f"{aid}: the untouched stub earns points on {t.test.nodeid}" for t in result.tests if t.score > 0]
    # an unanswered question earns 0 at once; one read as answered waits for an instructor (the
    # question shipped outside its heading and quote lines counts as an answer)
    return problems + [f"{aid}: the untouched stub's {t.test.nodeid} reads as answered (pending an instructor): "
                       f"ship the question as a '#' heading and '>' quote lines" for t in result.tests
                       if t.status == MANUAL]


def check_notebook(course: Course, nid: str, sandbox: str, hardware: str | None = None) -> list[str]:
    """Invariants 1, 2 and 4 of a notebook exercise (its release checks itself for leaks)."""
    from autograder.notebooks.grade import grade_notebook
    from autograder.notebooks.release import release_notebook

    reference = grade_notebook(course=course, exercise_id=nid, notebook=None, sandbox=sandbox, hardware=hardware)
    problems = [f"{nid}: the source notebook loses points on {t.test.nodeid}: {(t.reason or t.status)[-600:]}"
                for t in reference.result.tests if t.graded and t.score < t.test.points - 1e-9]
    with tempfile.TemporaryDirectory(prefix="ag-notebook-check-") as out:
        try:
            released = release_notebook(course=course, exercise_id=nid, out=Path(out))
        except GraderError as e:
            return problems + [f"{nid}: {e}"]
        stub = grade_notebook(course=course, exercise_id=nid, notebook=released, sandbox=sandbox, hardware=hardware)
    return problems + [f"{nid}: the released notebook earns points on {t.test.nodeid}"
                       for t in stub.result.tests if t.score > 0]


def check_all(*, course: Course, ids: list[str] | None, grade: bool, sandbox: str, say: Say) -> list[str]:
    failures: list[str] = []
    for aid in ids or course.ids():
        found = (check_sync(course, aid) + check_given(course, aid) + check_mutants(course, aid)
                 + check_records(course, aid))
        if grade:
            found += check_reference(course, aid, sandbox) + check_stub(course, aid, sandbox)
        say(f"{aid}: " + ("[green]ok[/]" if not found else "[red]" + "; ".join(found) + "[/]"))
        failures += found
    if ids is None and grade:
        from autograder.notebooks.exercise import notebook_ids

        for nid in notebook_ids(course):
            found = check_notebook(course, nid, sandbox)
            say(f"notebook {nid}: " + ("[green]ok[/]" if not found else "[red]" + "; ".join(found) + "[/]"))
            failures += found
    if ids is None and (found := check_schedule(course)):
        say("schedule: [red]" + "; ".join(found) + "[/]")
        failures += found
    return failures
