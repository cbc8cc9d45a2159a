"""Report: a terminal table, Gradescope `results.json`, JUnit XML and a Markdown summary.

The summary never says "all tests passed" unless every test ran here, hidden ones included.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autograder.results import NOT_GRADED, PASSED, AssignmentResult, TestResult

STYLE = {"passed": "green", "failed": "red", "error": "red", "not_graded": "yellow"}


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
    if gaps:
        line += "; " + "; ".join(gaps)
    elif graded and passed == len(graded):
        line += "; all tests passed, hidden ones included"
    return line


def print_result(result: AssignmentResult, console: Console | None = None, verbose: bool = False) -> None:
    console = console or Console()
    table = Table(title=f"{result.id} — {result.title}  [{result.hardware}, sandbox {result.sandbox}, {result.source}]")
    for column in ("test", "suite", "status", "points", "time", "perf / reason"):
        table.add_column(column, overflow="fold")
    for t in result.tests:
        detail = "; ".join(t.perf_notes) or t.reason.splitlines()[0][:120] if (t.perf_notes or t.reason) else ""
        table.add_row(
            t.test.nodeid, "hidden" if t.test.hidden else "public",
            f"[{STYLE.get(t.status, 'white')}]{t.status.replace('_', ' ')}[/]",
            f"{_fmt(t.score)}/{_fmt(t.test.points)}" if t.graded else f"–/{_fmt(t.test.points)}",
            f"{t.duration_s:.1f}s", detail,
        )
    console.print(table)
    if verbose:
        for t in result.tests:
            if t.status != PASSED and t.status != NOT_GRADED and not t.test.hidden and (t.output or t.reason):
                console.rule(f"[red]{t.test.nodeid}")
                console.print(t.reason, markup=False)
                console.print(t.output[-2500:], markup=False, highlight=False)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}")
    console.print(f"[bold]{summary_line(result)}[/]  ({result.wall_s:.1f} s)")


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
                "score": round(t.score, 4), "max_score": t.max_score,
                "status": "passed" if t.status == PASSED else "failed",
                "output": output[-4000:],
                "tags": [result.id, "hidden" if t.test.hidden else "public"] + (["gpu"] if t.test.gpu else []),
                "visibility": _visibility(t),
                "extra_data": {"status": t.status, "metrics": t.metrics, "duration_s": t.duration_s},
            })
    output = "\n".join(summary_line(r) for r in results)
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
                              failures=str(sum(t.status in ("failed", "error") for t in result.tests)),
                              skipped=str(len(result.not_graded)), time=f"{result.wall_s:.2f}")
        for t in result.tests:
            case = ET.SubElement(suite, "testcase", classname=result.id, name=t.test.nodeid, time=f"{t.duration_s:.3f}")
            if t.status == NOT_GRADED:
                ET.SubElement(case, "skipped", message=t.reason)
            elif t.status != PASSED:
                node = ET.SubElement(case, "failure", message=t.reason.splitlines()[0][:200] if t.reason else t.status)
                node.text = t.output[-4000:]
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suites).write(path, encoding="unicode", xml_declaration=True)


def markdown(results: list[AssignmentResult]) -> str:
    lines = ["| assignment | score | passed | not graded here | time |", "|---|---|---|---|---|"]
    for r in results:
        graded = [t for t in r.tests if t.graded]
        lines.append(f"| {r.id} | {_fmt(r.score)}/{_fmt(r.max_score)} | {sum(t.status == PASSED for t in graded)}/{len(graded)} "
                     f"| {len(r.not_graded)} | {r.wall_s:.0f} s |")
    lines.append("")
    lines += [f"- {summary_line(r)}" for r in results]
    failing = [(r.id, t) for r in results for t in r.tests if t.graded and t.status != PASSED]
    if failing:
        lines += ["", "<details><summary>failing tests</summary>", ""]
        lines += [f"- `{aid}` `{t.test.nodeid}`: {t.reason.splitlines()[0] if t.reason else t.status}" for aid, t in failing]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
