"""An instructor's review of held tests: release (award what the test earned before the hold) or deny.

A test is HELD when its pass rests on evidence the submission could have written (the tamper scan
found reflective access to the grader, or the judge measured something past what the hardware can
do). Its row in results.json keeps `extra_data.held_score`, the score the grading would have
given; `autograder review` records the instructor's decision in place, like `autograder manual`
for a written answer, and recomputes the total.
"""

from __future__ import annotations

from autograder.host.results import HELD

REVIEWED = "reviewed"  # a held test's status once an instructor released or denied it


def is_named(test: str, name: str) -> bool:
    """`test` names the test `name` ("<id>: <nodeid>"): "all", the full name, or its end."""
    return test == "all" or name == test or name.endswith(test)


def awards(held_score: float, release: bool) -> float:
    """The one rule of a review: a release awards what the test earned before the hold, a denial nothing."""
    return held_score if release else 0.0


def verdict(release: bool, awarded: float, points: float) -> str:
    return f"released by an instructor: {awarded:g}/{points:g}" if release else f"denied by an instructor: 0/{points:g}"


def held_rows(results: dict, test: str) -> list[dict]:
    """The held rows of `results` that `test` names: "all", a row's full name ("<id>: <nodeid>"),
    or the end of one (a nodeid, or its test name after "::"). ValueError names the held tests when
    none matches."""
    held = [r for r in results.get("tests", []) if r.get("extra_data", {}).get("status") == HELD]
    rows = [r for r in held if is_named(test, r["name"])]
    if not rows:
        names = [r["name"] for r in held]
        raise ValueError(f"no held test {test!r} in these results; held: {names or 'none'}")
    return rows


def record_review(results: dict, test: str, *, release: bool, comment: str = "") -> list[dict]:
    """Release or deny the held tests `test` names (see `held_rows`), in place; returns the rows."""
    rows = held_rows(results, test)
    for row in rows:
        extra = row["extra_data"]
        points = float(extra.get("points", 0.0))
        awarded = awards(float(extra.get("held_score", 0.0)), release)
        row.update(score=round(awarded, 4), max_score=points, status="passed" if awarded == points else "failed")
        extra["status"] = REVIEWED
        said = verdict(release, awarded, points)
        row["output"] = "\n".join(filter(None, [said, comment, row.get("output", "")]))[:4000]
    results["score"] = round(sum(r.get("score", 0) for r in results["tests"]), 4)
    return rows
