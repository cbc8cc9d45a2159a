"""A notebook's grading written into a class gradebook, as grade-class writes a package's: its
written answers are outcomes awaiting an instructor, whose points `autograder gradebook manual`
records in the gradebook's manual_points table."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from autograder.classroom.discover import safe_name
from autograder.classroom.export import export_class
from autograder.classroom.gradebook import GRADED, Gradebook, GradeKey, GradeRecord, Outcome
from autograder.host.submission import Grading, write_results

GRADEBOOK = "gradebook.sqlite"  # the file grade-class keeps in its output folder


def record_grading(*, grading: Grading, student: str, out: Path) -> Path:
    """Record `grading` as `student`'s current submission in the gradebook of `out` (its results file
    where grade-class puts one, out/<id>/results/<student>.json; the class exports refreshed)."""
    result = grading.result
    student = safe_name(student)
    key = GradeKey(student, result.id, grading.submission_hash, grading.grader_version)
    results_path = out / result.id / "results" / f"{student}.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    write_results(results_path, [replace(grading, student=student)])
    outcomes = [Outcome.of(t) for t in result.tests]
    with Gradebook(out / GRADEBOOK) as book:
        book.record(GradeRecord(key, GRADED, round(result.score, 4), round(result.max_score, 4),
                                results_path=os.path.relpath(results_path, out), hardware=result.hardware, outcomes=outcomes))
        export_class(book=book, assignment_id=result.id, out=out)
    return results_path
