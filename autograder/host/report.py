"""Report: the terminal table and the one-line summary of a grading (the files, Gradescope's
results.json, JUnit XML and Markdown: host/result_files.py).

The summary never says "all tests passed" unless every test ran here, hidden ones included, and
none is held for an instructor's review (HELD: named with its reason everywhere, no points counted). Text a
submission controls (test names, reasons, output, notes) is escaped before it reaches rich's markup:
a "[/]" in an error message must print, not crash the report.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from autograder.host.attachments import listing
from autograder.host.results import ERROR, FAILED, HELD, MANUAL, NOT_GRADED, PASSED, AssignmentResult, TestResult
from autograder.protocol.text import shorten

STYLE = {PASSED: "green", FAILED: "red", ERROR: "red", NOT_GRADED: "yellow", MANUAL: "cyan", HELD: "magenta"}
HELD_NOTE = "held for an instructor's review; no points counted"


def points_text(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def tests_here(result: AssignmentResult) -> list[TestResult]:
    """The tests this machine grades or holds: a written answer counts whether filled in or not."""
    return [t for t in result.tests if t.status != NOT_GRADED]


def summary_line(result: AssignmentResult) -> str:
    """One honest sentence on the outcome of an assignment. Its denominators (points, tests) stay
    the same whether a written answer is filled in (pending) or not (failed), or a test is held."""
    here = tests_here(result)
    passed = sum(t.status == PASSED for t in here)
    line = f"{result.id}: {points_text(result.score)}/{points_text(result.possible)} points, {passed}/{len(here)} tests passed"
    gaps = []
    if result.not_graded:
        gaps.append(f"{_count(len(result.not_graded), 'test')} not graded here (needs other hardware)")
    if not result.hidden_available:
        gaps.append("hidden tests not run (student release)")
    if result.pending:
        points = sum(t.test.points for t in result.pending)
        gaps.append(f"{_count(len(result.pending), 'written answer')} ({points_text(points)} points) pending an "
                    "instructor's grading")
    if result.held:
        points = sum(t.test.points for t in result.held)
        gaps.append(f"{_count(len(result.held), 'test')} ({points_text(points)} points) {HELD_NOTE}")
    if gaps:
        line += "; " + "; ".join(gaps)
    elif here and passed == len(here):
        line += "; all tests passed, hidden ones included"
    return line


DETAIL_CHARS = 240  # a reason's numbers (expected, got, tolerance, where) fit; V=1 prints it whole


def _detail(t: TestResult) -> str:
    """Perf bars, else the grader's reason, else the first error line pytest printed ("E   ...")."""
    if t.perf_notes:
        return escape("; ".join(t.perf_notes))
    if t.reason:
        return escape(shorten(t.reason.splitlines()[0], DETAIL_CHARS))
    errors = [line[1:].strip() for line in t.output.splitlines() if line.startswith("E ")]
    return escape(shorten(errors[0], DETAIL_CHARS)) if errors else ""


def _test_row(t: TestResult, label: str) -> tuple[str, ...]:
    points = f"{points_text(t.score)}/{points_text(t.test.points)}" if t.graded else f"–/{points_text(t.test.points)}"
    status = f"[{STYLE.get(t.status, 'white')}]{t.status.replace('_', ' ')}[/]"
    return (escape(label), "hidden" if t.test.hidden else "public", status, points, f"{t.duration_s:.1f}s", _detail(t))


def _file_rows(tests: list[TestResult], verbose: bool) -> list[tuple[str, ...]]:
    """A file whose tests all passed is one row; otherwise its other tests are listed one by one."""
    file = tests[0].test.file
    suite = "hidden" if tests[0].test.hidden else "public"
    quiet = [t for t in tests if t.status == PASSED and not t.perf_notes] if not verbose else []
    if len(quiet) == len(tests):
        points = f"{points_text(sum(t.score for t in tests))}/{points_text(sum(t.test.points for t in tests))}"
        return [(escape(f"{file} ({len(tests)} tests)"), suite, "[green]passed[/]", points,
                 f"{sum(t.duration_s for t in tests):.1f}s", "")]
    rows = [(f"[bold]{escape(file)}[/]", suite, "", "", "", "")]
    rows += _failing_rows([t for t in tests if t not in quiet], suite, fold=not verbose)
    if quiet:
        rows.append((f"  … {len(quiet)} more passed (V=1 names them)", suite, "[green]passed[/]",
                     f"{points_text(sum(t.score for t in quiet))}/{points_text(sum(t.test.points for t in quiet))}", "", ""))
    return rows


def _failing_rows(tests: list[TestResult], suite: str, fold: bool = True) -> list[tuple[str, ...]]:
    """One row per test, except that (unless `fold` is off: V=1) tests failing for the same reason
    (an unfilled stub's NotImplementedError with its task id, typically) fold into their first row
    and a count."""
    by_reason: dict[str, list[TestResult]] = {}
    for t in tests:
        same = fold and t.status in (FAILED, ERROR, HELD) and _detail(t)
        key = f"{t.status}\0{_detail(t)}" if same else f"\0{t.test.nodeid}"
        by_reason.setdefault(key, []).append(t)
    rows = []
    for group in by_reason.values():
        rows.append(_test_row(group[0], "  " + group[0].test.nodeid.split("::", 1)[-1]))
        if len(group) > 1:
            earned = points_text(sum(t.score for t in group[1:])) if group[0].graded else "–"  # a held test earns nothing yet
            points = f"{earned}/{points_text(sum(t.test.points for t in group[1:]))}"
            how = "held" if group[0].status == HELD else "failing"
            rows.append((f"  … {len(group) - 1} more {how} the same way (V=1 names them)", suite,
                         f"[{STYLE.get(group[0].status, 'white')}]{group[0].status}[/]",
                         points, f"{sum(t.duration_s for t in group[1:]):.1f}s", ""))
    return rows


TABLE_MIN_WIDTH = 120  # narrower, six columns fold test ids and reasons into 15-character slivers
# Besides the test column: suite, status, points and time (~35 columns with borders) and a reason
# column at least this wide; a test id never wraps inside the table (it is what `-k` takes).
OTHER_COLUMNS, MIN_REASON = 35, 40


def _label_width(rows: list[tuple[str, ...]]) -> int:
    return max((Text.from_markup(row[0]).cell_len for row in rows), default=0)


def _fits_table(rows: list[tuple[str, ...]], width: int) -> bool:
    return width >= max(TABLE_MIN_WIDTH, _label_width(rows) + OTHER_COLUMNS + MIN_REASON)


def _rows(result: AssignmentResult, verbose: bool) -> list[tuple[str, ...]]:
    by_file: dict[str, list[TestResult]] = {}
    for t in result.tests:
        by_file.setdefault(t.test.file, []).append(t)
    # public files first: what a student can run and read comes before what only the grader holds
    return [row for tests in sorted(by_file.values(), key=lambda ts: ts[0].test.hidden)
            for row in _file_rows(tests, verbose)]


def _print_table(title: str, rows: list[tuple[str, ...]], console: Console) -> None:
    table = Table(title=title)
    table.add_column("test", no_wrap=True, min_width=_label_width(rows))
    for column in ("suite", "status", "points", "time"):
        table.add_column(column, no_wrap=True)
    table.add_column("perf / reason", overflow="fold", min_width=MIN_REASON)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _print_list(title: str, rows: list[tuple[str, ...]], console: Console) -> None:
    """The same rows for a narrow terminal: a line per file or test with the whole id, the reason
    indented on the lines below it at the full width."""
    console.print(f"[bold]{title}[/]")
    for label, suite, status, points, time, detail in rows:
        if not status:  # a file's heading
            console.print(f"{suite} {label}")
            continue
        indent = "  " if label.startswith("  ") else ""
        head = f"{indent}{status} {points} {time}"
        if Text.from_markup(f"{head}  {label.strip()}").cell_len <= console.width:
            console.print(f"{head}  {label.strip()}")
        else:  # the id on a line of its own, so that it wraps only where it is wider than the terminal
            console.print(head)
            console.print(f"{indent}{label.strip()}", overflow="fold")
        if detail:
            console.print(Padding(detail, (0, 0, 0, len(indent) + 4)), overflow="fold")


def _graded_what(result: AssignmentResult) -> str:
    """Whose code and which suites: "your assignments/ folder" alone would read as public tests only."""
    whose = {"student": "assignments/ folder", "solution": "reference solution"}.get(result.source, result.source)
    return f"{whose}, {'public and hidden tests' if result.hidden_available else 'public tests only'}"


def print_result(result: AssignmentResult, console: Console | None = None, verbose: bool = False) -> None:
    """The table of one assignment (a list where the terminal is too narrow for whole test ids and a
    reason beside them): passing files folded to one row unless `verbose`."""
    console = console or Console()
    title = escape(f"{result.id} — {result.title}  [{result.hardware}, sandbox {result.sandbox}, {_graded_what(result)}]")
    rows = _rows(result, verbose)
    printer = _print_table if _fits_table(rows, console.width) else _print_list
    printer(title, rows, console)
    if verbose:
        for t in result.tests:
            if t.status not in (PASSED, NOT_GRADED) and not t.test.hidden and (t.output or t.reason):
                console.rule(f"[red]{escape(t.test.nodeid)}")
                console.print(t.reason, markup=False)
                console.print(t.output[-2500:], markup=False, highlight=False)
    for row in listing(result):
        if not row.problem:  # a figure not kept is explained among the notes below
            arrow = "->" if row.path else ":"
            console.print(f"[cyan]figure:[/] {escape(row.nodeid)} {escape(row.name)} {arrow} {escape(row.where)}")
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(f"[bold]{escape(summary_line(result))}[/]  ({result.wall_s:.1f} s)")
