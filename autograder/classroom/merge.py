"""Join a CPU grading and a GPU-runner grading of the same submission into one grade.

A CPU machine grades correctness and leaves GPU tests "not graded here"; a GPU runner grades
those. The merged results take each test from the run that graded it. Two results are joined only
when they are gradings of the same thing: the same assignments, submission hash and grader
version (from the files' extra_data, which `autograder grade --json` writes), the same tests, and
no test graded by both with different outcomes; anything else is refused with the reason.
"""

from __future__ import annotations

import copy

from autograder.host.results import MANUAL, NOT_GRADED
from autograder.host.written import GRADED_MANUALLY


class MergeError(ValueError):
    """Two results that are not gradings of the same submission by the same grader."""


def _meta(data: dict, name: str) -> dict[str, dict]:
    extra = data.get("extra_data", {})
    if extra.get("grading_failed"):
        raise MergeError(f"{name} is a failed grading, not a grade")
    meta = extra.get("autograder", {}).get("assignments")
    if not meta:
        raise MergeError(f"{name} says nothing of what it graded (no extra_data.autograder): "
                         "write it with `autograder grade --json`")
    return meta


def _status(row: dict) -> str:
    return row.get("extra_data", {}).get("status", "")


def _outcome(row: dict) -> tuple[str, float]:
    return _status(row), round(float(row.get("score", 0)), 4)


def _check_same_grading(a: dict[str, dict], b: dict[str, dict], names: tuple[str, str]) -> None:
    if set(a) != set(b):
        raise MergeError(f"different assignments: {names[0]} has {sorted(a)}, {names[1]} has {sorted(b)}")
    for aid in sorted(a):
        for field in ("submission_hash", "grader_version"):
            if a[aid].get(field) != b[aid].get(field):
                raise MergeError(f"{aid}: different {field.replace('_', ' ')}: {a[aid].get(field)} in {names[0]}, "
                                 f"{b[aid].get(field)} in {names[1]} (not gradings of the same submission "
                                 "by the same grader)")


def _pick(ra: dict, rb: dict) -> tuple[dict, str] | None:
    """The row to keep and which run it came from ("a", "b", "both"); None for a conflict."""
    sa, sb = _status(ra), _status(rb)
    if sa == NOT_GRADED or sb == NOT_GRADED:
        return (rb, "b") if sa == NOT_GRADED and sb != NOT_GRADED else (ra, "a" if sb == NOT_GRADED else "both")
    if {sa, sb} == {MANUAL, GRADED_MANUALLY}:  # an instructor's points, recorded in one of the two files
        return (ra, "a") if sa == GRADED_MANUALLY else (rb, "b")
    return (ra, "both") if _outcome(ra) == _outcome(rb) else None


def _merge_rows(rows_a: dict[str, dict], rows_b: dict[str, dict], names: tuple[str, str]
                ) -> tuple[list[dict], dict[str, int]]:
    """The merged rows in A's order, and how many graded tests came from A only, B only, both."""
    merged, conflicts, counts = [], [], {"a": 0, "b": 0, "both": 0}
    for name, ra in rows_a.items():
        picked = _pick(ra, rows_b[name])
        if picked is None:
            sa, sb = _outcome(ra), _outcome(rows_b[name])
            conflicts.append(f"{name}: {sa[0]} {sa[1]:g} in {names[0]}, {sb[0]} {sb[1]:g} in {names[1]}")
            continue
        row, source = picked
        counts[source] += _status(row) != NOT_GRADED
        merged.append(copy.deepcopy(row))
    if conflicts:
        raise MergeError(f"{len(conflicts)} test(s) graded by both with different outcomes: "
                         + "; ".join(conflicts[:5]))
    return merged, counts


def merge_results(a: dict, b: dict, names: tuple[str, str] = ("A", "B")) -> dict:
    """The results `a` and `b` (results.json dicts) joined into one; MergeError when they differ."""
    meta_a, meta_b = _meta(a, names[0]), _meta(b, names[1])
    _check_same_grading(meta_a, meta_b, names)
    rows_a = {r["name"]: r for r in a.get("tests", [])}
    rows_b = {r["name"]: r for r in b.get("tests", [])}
    if set(rows_a) != set(rows_b):
        only = sorted(set(rows_a) ^ set(rows_b))
        raise MergeError(f"different tests (e.g. {only[0]}): not gradings by the same grader")
    merged, counts = _merge_rows(rows_a, rows_b, names)
    output = (f"merged: {counts['a']} tests graded only in {names[0]}, {counts['b']} only in {names[1]}, "
              f"{counts['both']} in both with the same outcome\n{a.get('output', '')}\n{b.get('output', '')}")
    out = copy.deepcopy(a)
    out.update(tests=merged, output=output.strip(),
               score=round(sum(float(r.get("score", 0)) for r in merged), 4),
               execution_time=round(float(a.get("execution_time", 0)) + float(b.get("execution_time", 0)), 2))
    hardware = {aid: f"{meta_a[aid].get('hardware')}+{meta_b[aid].get('hardware')}" for aid in meta_a}
    out["extra_data"]["autograder"]["assignments"] = {aid: meta_a[aid] | {"hardware": hardware[aid]} for aid in meta_a}
    out["extra_data"]["autograder"]["merged_from"] = list(names)
    return out
