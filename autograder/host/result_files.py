"""The report files of a grading: Gradescope's `results.json` (and the form it is uploaded in),
JUnit XML and a Markdown summary, each written atomically (host/report.py prints the same to a
terminal)."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from autograder.host import atomic
from autograder.host.attachments import as_json, listing, output_lines
from autograder.host.report import HELD_NOTE, points_text, summary_line, tests_here
from autograder.host.results import ERROR, FAILED, HELD, MANUAL, NOT_GRADED, PASSED, AssignmentResult, TestResult


def _visibility(t: TestResult) -> str:
    return "after_due_date" if t.test.hidden else "visible"


def gradescope(results: list[AssignmentResult], *, error: str | None = None, meta: dict | None = None) -> dict:
    """Gradescope's results.json schema; with `error`, a valid file that explains the crash (marked
    `grading_failed` in its extra_data, so no caller takes it for a grade); `meta` (what identifies the
    grading: submission hash, grader version) goes to the top-level extra_data."""
    tests = []
    for result in results:
        for n, t in enumerate(result.tests, 1):
            output = "\n".join(filter(None, [t.reason, "; ".join(t.perf_notes), *output_lines(t.attachments), t.output]))
            tests.append({
                "name": f"{result.id}: {t.test.nodeid}", "number": f"{result.id}.{n}",
                # a pending written answer is 0 of 0 until `autograder manual` records its points
                "score": round(t.score, 4), "max_score": t.max_score,
                "status": {PASSED: "passed", MANUAL: "pending", HELD: "pending"}.get(t.status, "failed"),
                "output": output[-4000:],
                "tags": [result.id, "hidden" if t.test.hidden else "public"] + (["gpu"] if t.test.gpu else []),
                "visibility": _visibility(t),
                "extra_data": {"status": t.status, "metrics": t.metrics, "duration_s": t.duration_s,
                               "points": t.test.points} | ({"attachments": as_json(t.attachments)} if t.attachments else {})
                              | ({"held_score": round(t.held_score, 4)} if t.status == HELD else {}),
            })
    output = "\n".join(line for r in results for line in [summary_line(r), *(f"note: {n}" for n in r.notes),
                                                          *_held_lines(r)])
    if error:
        output = f"grading failed: {error}\n{output}".strip()
    data = {
        "score": round(sum(r.score for r in results), 4),
        "execution_time": round(sum(r.wall_s for r in results), 2),
        "output": output, "visibility": "visible", "stdout_visibility": "hidden",
        "tests": tests, "leaderboard": [],
    }
    extra = ({"autograder": meta} if meta else {}) | ({"grading_failed": True} if error else {})
    return data | ({"extra_data": extra} if extra else {})


def _held_lines(result: AssignmentResult) -> list[str]:
    """The held public tests by name and reason (a hidden test's row says it, shown after the due date)."""
    return [f"held: {t.test.nodeid}: {t.reason.splitlines()[0] if t.reason else HELD_NOTE}"
            for t in result.held if not t.test.hidden]


UPLOAD_NOTE = {NOT_GRADED: "NOT GRADED HERE (needs other hardware)",
               MANUAL: "PENDING: an instructor grades this answer",
               HELD: "held for an instructor's review"}


def upload_form(data: dict) -> dict:
    """A results dict as Gradescope should show it: a test this run did not grade (it needs other
    hardware), a written answer still pending or a test held for review has no status and no points, and its output says so
    first, so Gradescope shows it neutral, never as a failure. Names stay as they are (`autograder
    merge` and `autograder manual` find rows by name); the total is unchanged."""
    out = copy.deepcopy(data)
    for row in out.get("tests", []):
        status = row.get("extra_data", {}).get("status")
        if status not in UPLOAD_NOTE:
            continue
        for key in ("score", "max_score", "status"):
            row.pop(key, None)
        row["output"] = f"{UPLOAD_NOTE[status]}; no points counted in this score\n{row.get('output', '')}".strip()
        if status == NOT_GRADED:
            row["tags"] = [*row.get("tags", []), "not_graded_here"]
    return out


def write_json(path: Path, results: list[AssignmentResult], *, error: str | None = None,
               meta: dict | None = None, upload: bool = False) -> None:
    """results.json, written atomically (never a half-written file a caller could take for a grade);
    `upload`: in the form Gradescope shows (`upload_form`)."""
    data = gradescope(results, error=error, meta=meta)
    atomic.write_text(path, json.dumps(upload_form(data) if upload else data, indent=1))


def write_junit(path: Path, results: list[AssignmentResult]) -> None:
    suites = ET.Element("testsuites")
    for result in results:
        suite = ET.SubElement(suites, "testsuite", name=result.id, tests=str(len(result.tests)),
                              failures=str(sum(t.status in (FAILED, ERROR) for t in result.tests)),
                              skipped=str(len(result.not_graded)), time=f"{result.wall_s:.2f}")
        for t in result.tests:
            case = ET.SubElement(suite, "testcase", classname=result.id, name=t.test.nodeid, time=f"{t.duration_s:.3f}")
            if t.status in (NOT_GRADED, MANUAL, HELD):
                ET.SubElement(case, "skipped", message=f"{HELD_NOTE}: {t.reason}" if t.status == HELD else t.reason)
            elif t.status != PASSED:
                node = ET.SubElement(case, "failure", message=t.reason.splitlines()[0][:200] if t.reason else t.status)
                node.text = t.output[-4000:]
    text = ET.tostring(suites, encoding="unicode", xml_declaration=True)
    atomic.write_text(path, text)


def markdown(results: list[AssignmentResult], base: Path | None = None) -> str:
    """The summary: a table, a line per assignment, the failing tests, the figures tests attached
    (linked relative to `base`, the summary's folder)."""
    lines = ["| assignment | score | passed | not graded here | pending (written) | time |", "|---|---|---|---|---|---|"]
    for r in results:
        here = tests_here(r)
        pending = sum(t.test.points for t in r.pending)
        lines.append(f"| {r.id} | {points_text(r.score)}/{points_text(r.possible)} | {sum(t.status == PASSED for t in here)}/{len(here)} "
                     f"| {len(r.not_graded)} | {points_text(pending)} points | {r.wall_s:.0f} s |")
    lines.append("")
    lines += [f"- {summary_line(r)}" for r in results]
    failing = [(r.id, t) for r in results for t in r.tests if t.graded and t.status != PASSED]
    if failing:
        lines += ["", "<details><summary>failing tests</summary>", ""]
        lines += [f"- `{aid}` `{t.test.nodeid}`: {t.reason.splitlines()[0] if t.reason else t.status}" for aid, t in failing]
        lines += ["", "</details>"]
    held = [(r.id, t) for r in results for t in r.held]
    if held:
        lines += ["", f"**{HELD_NOTE}**", ""]
        lines += [f"- `{aid}` `{t.test.nodeid}` ({points_text(t.test.points)} points): "
                  f"{t.reason.splitlines()[0] if t.reason else HELD_NOTE}" for aid, t in held]
    figures = [(r.id, row) for r in results for row in listing(r, base)]
    if figures:
        lines += ["", "**figures**", ""]
        lines += [f"- `{aid}` `{row.nodeid}` {row.name}: " + (f"[{row.path}]({row.path})" if row.path else row.where)
                  for aid, row in figures]
    return "\n".join(lines) + "\n"


def write_files(results: list[AssignmentResult], *, error: str | None, meta: dict | None, json_path: str | None,
                junit_path: str | None, markdown_path: str | None) -> None:
    """The report files asked for, each written whole or not at all; results.json in the form Gradescope
    shows (`upload_form`)."""
    if json_path:
        write_json(Path(json_path), results, error=error, meta=meta, upload=True)
    if junit_path:
        write_junit(Path(junit_path), results)
    if markdown_path:
        atomic.write_text(Path(markdown_path), markdown(results, Path(markdown_path).parent))
