"""Report: a terminal table, Gradescope `results.json`, JUnit XML and a Markdown summary.

The summary never says "all tests passed" unless every test ran here, hidden ones included. Text a
submission controls (test names, reasons, output, notes) is escaped before it reaches rich's markup:
a "[/]" in an error message must print, not crash the report.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autograder.host.results import ERROR, FAILED, MANUAL, NOT_GRADED, PASSED, AssignmentResult, TestResult

STYLE = {PASSED: "green", FAILED: "red", ERROR: "red", NOT_GRADED: "yellow", MANUAL: "cyan"}


def _fmt(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def summary_line(result: AssignmentResult) -> str:
    """One honest sentence on the outcome of an assignment."""
    graded = [t for t in result.tests if t.graded]
    passed = sum(t.status == PASSED for t in graded)
    line = f"{result.id}: {_fmt(result.score)}/{_fmt(result.max_score)} points, {passed}/{len(graded)} graded tests passed"
    gaps = []
    if result.not_graded:
        gaps.append(f"{len(result.not_graded)} not graded here (needs other hardware)")
    if not result.hidden_available:
        gaps.append("hidden tests not run (student release)")
    if result.pending:
        points = sum(t.test.points for t in result.pending)
        gaps.append(f"{_fmt(points)} points of {len(result.pending)} written answers pending an instructor's grading")
    if gaps:
        line += "; " + "; ".join(gaps)
    elif graded and passed == len(graded):
        line += "; all tests passed, hidden ones included"
    return line


def _detail(t: TestResult) -> str:
    """Perf bars, else the grader's reason, else the first error line pytest printed ("E   ...")."""
    if t.perf_notes:
        return escape("; ".join(t.perf_notes))
    if t.reason:
        return escape(t.reason.splitlines()[0][:160])
    errors = [line[1:].strip() for line in t.output.splitlines() if line.startswith("E ")]
    return escape(errors[0][:160]) if errors else ""


def _test_row(t: TestResult, label: str) -> tuple[str, ...]:
    points = f"{_fmt(t.score)}/{_fmt(t.test.points)}" if t.graded else f"–/{_fmt(t.test.points)}"
    status = f"[{STYLE.get(t.status, 'white')}]{t.status.replace('_', ' ')}[/]"
    return (escape(label), "hidden" if t.test.hidden else "public", status, points, f"{t.duration_s:.1f}s", _detail(t))


def _file_rows(tests: list[TestResult], verbose: bool) -> list[tuple[str, ...]]:
    """A file whose tests all passed is one row; otherwise its other tests are listed one by one."""
    file = tests[0].test.file
    suite = "hidden" if tests[0].test.hidden else "public"
    quiet = [t for t in tests if t.status == PASSED and not t.perf_notes] if not verbose else []
    if len(quiet) == len(tests):
        points = f"{_fmt(sum(t.score for t in tests))}/{_fmt(sum(t.test.points for t in tests))}"
        return [(escape(f"{file} ({len(tests)} tests)"), suite, "[green]passed[/]", points,
                 f"{sum(t.duration_s for t in tests):.1f}s", "")]
    rows = [(f"[bold]{escape(file)}[/]", suite, "", "", "", "")]
    rows += [_test_row(t, "  " + t.test.nodeid.split("::", 1)[-1]) for t in tests if t not in quiet]
    if quiet:
        rows.append((f"  … {len(quiet)} more passed", suite, "[green]passed[/]",
                     f"{_fmt(sum(t.score for t in quiet))}/{_fmt(sum(t.test.points for t in quiet))}", "", ""))
    return rows


def print_result(result: AssignmentResult, console: Console | None = None, verbose: bool = False) -> None:
    """The table of one assignment: passing files folded to one row unless `verbose`."""
    console = console or Console()
    table = Table(title=escape(f"{result.id} — {result.title}  [{result.hardware}, sandbox {result.sandbox}, "
                               f"{result.source}]"))
    table.add_column("test", ratio=3, overflow="fold")
    for column in ("suite", "status", "points", "time"):
        table.add_column(column, no_wrap=True)
    table.add_column("perf / reason", ratio=2, overflow="fold")
    by_file: dict[str, list[TestResult]] = {}
    for t in result.tests:
        by_file.setdefault(t.test.file, []).append(t)
    for tests in by_file.values():
        for row in _file_rows(tests, verbose):
            table.add_row(*row)
    console.print(table)
    if verbose:
        for t in result.tests:
            if t.status not in (PASSED, NOT_GRADED) and not t.test.hidden and (t.output or t.reason):
                console.rule(f"[red]{escape(t.test.nodeid)}")
                console.print(t.reason, markup=False)
                console.print(t.output[-2500:], markup=False, highlight=False)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(f"[bold]{escape(summary_line(result))}[/]  ({result.wall_s:.1f} s)")


def _visibility(t: TestResult) -> str:
    return "after_due_date" if t.test.hidden else "visible"


def gradescope(results: list[AssignmentResult], *, error: str | None = None) -> dict:
    """Gradescope's results.json schema; with `error`, a valid file that explains the crash."""
    tests = []
    for result in results:
        for n, t in enumerate(result.tests, 1):
            output = "\n".join(filter(None, [t.reason, "; ".join(t.perf_notes), t.output]))
            tests.append({
                "name": f"{result.id}: {t.test.nodeid}", "number": f"{result.id}.{n}",
                # a pending written answer is 0 of 0 until `autograder manual` records its points
                "score": round(t.score, 4), "max_score": t.max_score,
                "status": {PASSED: "passed", MANUAL: "pending"}.get(t.status, "failed"),
                "output": output[-4000:],
                "tags": [result.id, "hidden" if t.test.hidden else "public"] + (["gpu"] if t.test.gpu else []),
                "visibility": _visibility(t),
                "extra_data": {"status": t.status, "metrics": t.metrics, "duration_s": t.duration_s,
                               "points": t.test.points},
            })
    output = "\n".join(line for r in results for line in [summary_line(r), *(f"note: {n}" for n in r.notes)])
    if error:
        output = f"grading failed: {error}\n{output}".strip()
    return {
        "score": round(sum(r.score for r in results), 4),
        "execution_time": round(sum(r.wall_s for r in results), 2),
        "output": output, "visibility": "visible", "stdout_visibility": "hidden",
        "tests": tests, "leaderboard": [],
    }


def write_json(path: Path, results: list[AssignmentResult], *, error: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(gradescope(results, error=error), indent=1))


def write_junit(path: Path, results: list[AssignmentResult]) -> None:
    suites = ET.Element("testsuites")
    for result in results:
        suite = ET.SubElement(suites, "testsuite", name=result.id, tests=str(len(result.tests)),
                              failures=str(sum(t.status in (FAILED, ERROR) for t in result.tests)),
                              skipped=str(len(result.not_graded)), time=f"{result.wall_s:.2f}")
        for t in result.tests:
            case = ET.SubElement(suite, "testcase", classname=result.id, name=t.test.nodeid, time=f"{t.duration_s:.3f}")
            if t.status in (NOT_GRADED, MANUAL):
                ET.SubElement(case, "skipped", message=t.reason)
            elif t.status != PASSED:
                node = ET.SubElement(case, "failure", message=t.reason.splitlines()[0][:200] if t.reason else t.status)
                node.text = t.output[-4000:]
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suites).write(path, encoding="unicode", xml_declaration=True)


def markdown(results: list[AssignmentResult]) -> str:
    lines = ["| assignment | score | passed | not graded here | pending (written) | time |", "|---|---|---|---|---|---|"]
    for r in results:
        graded = [t for t in r.tests if t.graded]
        pending = sum(t.test.points for t in r.pending)
        lines.append(f"| {r.id} | {_fmt(r.score)}/{_fmt(r.max_score)} | {sum(t.status == PASSED for t in graded)}/{len(graded)} "
                     f"| {len(r.not_graded)} | {_fmt(pending)} points | {r.wall_s:.0f} s |")
    lines.append("")
    lines += [f"- {summary_line(r)}" for r in results]
    failing = [(r.id, t) for r in results for t in r.tests if t.graded and t.status != PASSED]
    if failing:
        lines += ["", "<details><summary>failing tests</summary>", ""]
        lines += [f"- `{aid}` `{t.test.nodeid}`: {t.reason.splitlines()[0] if t.reason else t.status}" for aid, t in failing]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
