"""Written answers: free text an instructor grades against a rubric.

Each `[[written]]` question of the spec has an answer file, `answers/<id>.md`, shipped with the
question and a placeholder; the rubric (`rubrics/<id>.md`) and the reference answer never ship.
The grader cannot judge prose: a written answer becomes a MANUAL result whose points stay pending
(in no automatic total, so a reference and a stub are judged on their automatic points alone)
until an instructor records them with `autograder manual`. An answer still empty fails at once.
"""

from __future__ import annotations

import re
from pathlib import Path

from autograder.host.results import FAILED, MANUAL, ExpectedTest, TestResult
from autograder.host.spec import AssignmentSpec
from autograder.host.stage import read_no_follow

PLACEHOLDER = "<!-- your answer here -->"
MIN_CHARS = 20  # fewer non-blank characters than this is no answer
MAX_BYTES = 64 * 1024  # what an instructor is shown of one answer
GRADED_MANUALLY = "graded_manually"  # a written answer's status once `autograder manual` recorded it


def answer_text(markdown: str) -> str:
    """What the student wrote: the file without HTML comments, headings and quoted lines (the
    question is shipped as a heading and a quote)."""
    text = re.sub(r"<!--.*?-->", "", markdown, flags=re.DOTALL)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("#", ">"))).strip()


def written_test(spec: AssignmentSpec, written_id: str) -> ExpectedTest:
    """The result row of one written question (its node id names the answer file)."""
    w = next(w for w in spec.written if w.id == written_id)
    return ExpectedTest(nodeid=f"{w.answer}::written", file=w.answer, points=w.points, gpu=False, perf=False)


def grade_written(spec: AssignmentSpec, source_dir: Path) -> list[TestResult]:
    """One result per written question of `spec`, read from the submission in `source_dir`."""
    results = []
    for w in spec.written:
        test = written_test(spec, w.id)
        path = source_dir / w.answer
        if path.is_symlink() or any(p.is_symlink() for p in path.parents if source_dir in p.parents):
            results.append(TestResult(test, FAILED, f"{w.answer} is a link: write the answer in the file itself"))
            continue
        try:
            answer = answer_text(read_no_follow(path)[:MAX_BYTES].decode(errors="replace"))
        except OSError:
            answer = None
        if answer is None or len("".join(answer.split())) < MIN_CHARS:
            missing = f"{w.answer} is missing" if answer is None else f"no answer written in {w.answer}"
            results.append(TestResult(test, FAILED, f"{missing}: write it below the question"))
        else:
            results.append(TestResult(test, MANUAL, f"pending: an instructor grades this answer ({w.points:g} points)",
                                      output=answer[:4000]))
    return results


def record_manual(results: dict, question: str, points: float, comment: str = "") -> dict:
    """Record an instructor's `points` for the written answer `question` ("<assignment>:<id>", or
    "<id>" when one assignment of the file has it) in a Gradescope results dict, in place: the row
    gets its score and its max, and the total is recomputed. Returns the row."""
    aid, _, wid = question.rpartition(":")
    rows = [t for t in results.get("tests", []) if t.get("extra_data", {}).get("status") in (MANUAL, GRADED_MANUALLY)
            and t["name"].endswith(f"answers/{wid}.md::written") and (not aid or t["name"].startswith(f"{aid}: "))]
    if len(rows) != 1:
        known = [t["name"] for t in results.get("tests", []) if t["name"].endswith("::written")]
        what = "no" if not rows else "more than one"
        raise ValueError(f"{what} written answer {question!r} in these results; written answers: {known or 'none'} "
                         "(name one as <assignment>:<id>)")
    row = rows[0]
    full = float(row["extra_data"]["points"])
    if not 0 <= points <= full:
        raise ValueError(f"{question}: points must lie in [0, {full:g}], got {points:g}")
    row.update(score=points, max_score=full, status="passed" if points == full else "failed")
    row["extra_data"]["status"] = GRADED_MANUALLY
    row["output"] = f"graded by an instructor: {points:g}/{full:g}" + (f"\n{comment}" if comment else "")
    # a row Gradescope shows neutral (not graded here) has no score
    results["score"] = round(sum(t.get("score", 0) for t in results["tests"]), 4)
    return row
