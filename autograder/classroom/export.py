"""Exports of a class's gradebook: an LMS-ready CSV, per-student results and a class report.

- `grades.csv`: one row per student, the final score (automatic points plus the instructor's
  written-answer points, less the late penalty) first; a submission that could not be graded has
  no score and says why; points still awaiting an instructor are a column of their own, and so
  are the points of tests held for an instructor's review (the tamper scan or the judge held them);
  once reviewed (`gradebook review`), a released test's points count in the score (`released_points`)
  and a decided test counts in `max_score`.
- `reviews.csv`: every decision on a held test, superseded ones included (the audit trail).
- `students/<student>.json` (results with the instructor's points and the lateness applied, in the
  form Gradescope shows) and `students/<student>.md` (what to tell the student).
- `report.md` and `report.png`: the score histogram and each test's pass rate, the tests the class
  fails most first. Tests not graded on this hardware and written answers are left out of the rates.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import statistics
from dataclasses import dataclass
from pathlib import Path

from autograder.classroom.discover import safe_name
from autograder.classroom.gradebook import GRADED, Gradebook, Outcome
from autograder.classroom.reviews import HeldTest, held_of, trail
from autograder.host import atomic
from autograder.host.result_files import upload_form
from autograder.host.results import HELD, MANUAL, NOT_GRADED, PASSED
from autograder.host.review import record_review, verdict
from autograder.host.written import record_manual

CSV_COLUMNS = ("student", "assignment", "score", "max_score", "status", "auto_score", "manual_points",
               "pending_points", "held_points", "released_points", "late_days", "penalty", "submitted_at",
               "graded_at", "note",
               "submission_hash", "grader_version")


REVIEW_COLUMNS = ("student", "assignment", "submission_hash", "test", "decision", "points", "max_points", "reviewer",
                  "reviewed_at", "comment", "current")


@dataclass(frozen=True)
class StudentGrade:
    """One student's current grade, with the instructor's points and the late penalty applied."""

    row: sqlite3.Row
    outcomes: list[Outcome]
    manual_points: float
    pending_points: float
    held: tuple[HeldTest, ...] = ()  # its held tests, with the instructor's decisions

    @property
    def graded(self) -> bool:
        return self.row["status"] == GRADED

    @property
    def max_score(self) -> float:
        """Automatic points graded here plus every written answer's and every reviewed test's points."""
        reviewed = sum(h.outcome.points for h in self.held if h.decision is not None)
        return self.row["max_score"] + sum(o.points for o in self.outcomes if o.status == MANUAL) + reviewed

    @property
    def held_points(self) -> float:
        """Points of tests held for an instructor's review and not yet decided: in no total."""
        return sum(h.outcome.points for h in self.held if h.decision is None)

    @property
    def released_points(self) -> float:
        """What the instructor's releases of held tests award (a denial awards nothing)."""
        return sum(h.awarded for h in self.held)

    @property
    def score(self) -> float:
        earned = self.row["score"] + self.manual_points + self.released_points
        return round(earned * (1 - self.row["penalty"]), 4)

    @property
    def status(self) -> str:
        if not self.graded:
            return self.row["status"]
        waiting = [f"pending manual grading ({self.pending_points:g} points)"] if self.pending_points else []
        if self.held_points:
            waiting.append(f"held for review ({self.held_points:g} points)")
        return "; ".join(waiting) or GRADED


def student_grades(book: Gradebook, assignment_id: str) -> list[StudentGrade]:
    grades = []
    for row in book.current(assignment_id):
        outcomes = book.outcomes(row["id"])
        manual = book.manual(row)
        written = {o.nodeid.split("/")[-1].removesuffix(".md::written"): o for o in outcomes if o.status == MANUAL}
        given = sum(manual[q]["points"] for q in written if q in manual)
        pending = sum(o.points for q, o in written.items() if q not in manual)
        grades.append(StudentGrade(row, outcomes, given, pending, tuple(held_of(book, row))))
    return grades


def lms_csv(grades: list[StudentGrade]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for g in grades:
        r = g.row
        graded = g.graded
        writer.writerow([r["student"], r["assignment"], f"{g.score:g}" if graded else "",
                         f"{g.max_score:g}" if graded else "", g.status, f"{r['score']:g}" if graded else "",
                         f"{g.manual_points:g}", f"{g.pending_points:g}", f"{g.held_points:g}",
                         f"{g.released_points:g}", r["late_days"], f"{r['penalty']:g}",
                         r["submitted_at"] or "", r["graded_at"], "; ".join(filter(None, [r["note"], r["late_note"]])),
                         r["submission_hash"], r["grader_version"]])
    return buf.getvalue()


def reviews_csv(book: Gradebook, assignment_id: str) -> str:
    """Every decision on a held test of `assignment_id`, oldest first; `current` marks the ones in force."""
    rows = trail(book, assignment_id)
    latest = {(r["student"], r["submission_hash"], r["nodeid"]): r["id"] for r in rows}
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(REVIEW_COLUMNS)
    for r in rows:
        writer.writerow([r["student"], r["assignment"], r["submission_hash"], r["nodeid"],
                         "released" if r["released"] else "denied", f"{r['points']:g}", f"{r['max_points']:g}",
                         r["reviewer"], r["reviewed_at"], r["comment"],
                         int(latest[(r["student"], r["submission_hash"], r["nodeid"])] == r["id"])])
    return buf.getvalue()


def pass_rates(grades: list[StudentGrade]) -> list[tuple[str, float, int, int, float]]:
    """(test, pass rate, passed, graded, points) per test graded here, lowest pass rate first."""
    tally: dict[str, list[int]] = {}
    points: dict[str, float] = {}
    for g in grades:
        for o in g.outcomes:
            if o.status in (NOT_GRADED, MANUAL, HELD) or o.nodeid.endswith("::written"):
                continue
            counts = tally.setdefault(o.nodeid, [0, 0])
            counts[0] += o.status == PASSED
            counts[1] += 1
            points[o.nodeid] = o.points
    rows = [(nodeid, p / n, p, n, points[nodeid]) for nodeid, (p, n) in tally.items()]
    return sorted(rows, key=lambda r: (r[1], r[0]))


def class_markdown(assignment_id: str, grades: list[StudentGrade]) -> str:
    graded = [g for g in grades if g.graded]
    scores = [g.score for g in graded]
    lines = [f"# {assignment_id}: class report", ""]
    if scores:
        lines.append(f"{len(graded)} graded of {len(grades)} students; score mean {statistics.mean(scores):.2f}, "
                     f"median {statistics.median(scores):g}, min {min(scores):g}, max {max(scores):g} "
                     f"(of {max(g.max_score for g in graded):g})")
    if not scores:
        lines.append(f"no graded submission among {len(grades)} students")
    pending = [g for g in graded if g.pending_points]
    if pending:
        lines.append(f"{len(pending)} with written answers pending an instructor's grading: "
                     + ", ".join(g.row["student"] for g in pending))
    held = [g for g in graded if g.held_points]
    if held:
        lines.append(f"{len(held)} with tests held for an instructor's review (no points counted): "
                     + ", ".join(g.row["student"] for g in held))
    if decided := sum(h.decision is not None for g in graded for h in g.held):
        lines.append(f"{decided} held test(s) reviewed by an instructor (the trail: reviews.csv)")
    problems = [g for g in grades if not g.graded]
    if problems:
        lines += ["", "## Not graded", ""]
        lines += [f"- {g.row['student']}: {g.row['status']}: {g.row['note']}" for g in problems]
    lines += ["", "## Pass rate per test (the tests the class fails most first)", "",
              "| test | points | pass rate | passed | graded |", "|---|---|---|---|---|"]
    lines += [f"| `{t}` | {pts:g} | {rate:.0%} | {p} | {n} |" for t, rate, p, n, pts in pass_rates(grades)]
    lines += ["", "![score histogram and pass rates](report.png)", ""]
    return "\n".join(lines)


def class_png(path: Path, assignment_id: str, grades: list[StudentGrade]) -> None:
    """The score histogram beside the per-test pass rates (lowest at the top)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    scores = [g.score for g in grades if g.graded]
    rates = pass_rates(grades)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, max(4, 0.35 * len(rates) + 1.5)))
    top = max([g.max_score for g in grades if g.graded] or [1.0])
    left.hist(scores, bins=min(20, max(5, len(set(scores)))), range=(0, top), color="#4878a8", edgecolor="white")
    left.set(title=f"{assignment_id}: scores ({len(scores)} students)", xlabel="score", ylabel="students")
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    names = [r[0].split("::", 1)[-1][:48] for r in rates]
    right.barh(range(len(rates)), [100 * r[1] for r in rates], color="#c0504d")
    right.set_yticks(range(len(rates)), names, fontsize=8)
    right.invert_yaxis()
    right.set(title="pass rate per test", xlabel="% of graded submissions passing", xlim=(0, 100))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic.write_bytes(path, buf.getvalue())


def _student_results(root: Path, g: StudentGrade, book: Gradebook) -> dict | None:
    """The student's results file with the instructor's points and the lateness applied."""
    r = g.row
    path = root / r["results_path"] if r["results_path"] else None
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text())
    for question, m in book.manual(r).items():
        record_manual(data, f"{r['assignment']}:{question}", m["points"], m["comment"])
    for h in g.held:
        if h.decision is not None and _is_held_row(data, h.name):
            record_review(data, h.name, release=h.decision.released, comment=h.decision.comment)
    data["score"] = g.score
    late = f"late: {r['late_note']} (score {r['score'] + g.manual_points:g} before the penalty)" if r["penalty"] else ""
    data["output"] = "\n".join(filter(None, [late, data.get("output", "")]))
    return upload_form(data)


def _is_held_row(data: dict, name: str) -> bool:
    """The results file still holds `name` (it may be another submission's file, see keep())."""
    return any(t.get("name") == name and t.get("extra_data", {}).get("status") == HELD for t in data.get("tests", []))


def _student_markdown(g: StudentGrade) -> str:
    r = g.row
    if not g.graded:
        return f"# {r['assignment']}: {r['student']}\n\nNot graded ({r['status']}): {r['note']}\n"
    lines = [f"# {r['assignment']}: {r['student']}", "", f"Score: {g.score:g}/{g.max_score:g}"]
    if r["late_note"]:
        lines.append(f"- {r['late_note']}")
    if elsewhere := sum(o.status == NOT_GRADED for o in g.outcomes):
        lines.append(f"- {elsewhere} test(s) need other hardware: not graded here, in no total")
    if g.pending_points:
        lines.append(f"- {g.pending_points:g} points of written answers are pending an instructor's grading")
    if g.held_points:
        lines.append(f"- {g.held_points:g} points of tests are held for an instructor's review; no points counted")
    for h in g.held:
        if h.decision is not None:
            said = verdict(h.decision.released, h.awarded, h.outcome.points)
            lines.append(f"- `{h.outcome.nodeid}` (held): {said}" + (f": {h.decision.comment}" if h.decision.comment else ""))
    missed = [o for o in g.outcomes if o.status not in (PASSED, NOT_GRADED, MANUAL)]
    if missed:
        lines += ["", "| test | status | points |", "|---|---|---|"]
        decided = {h.outcome.nodeid: h for h in g.held if h.decision is not None}
        lines += [f"| `{o.nodeid}` | {_shown(o, decided.get(o.nodeid))} |" for o in missed]
    return "\n".join(lines) + "\n"


def _shown(o: Outcome, h: HeldTest | None) -> str:
    """A test's status and points cells; a reviewed held test shows the decision's."""
    if h is None or h.decision is None:
        return f"{o.status} | {o.score:g}/{o.points:g}"
    return f"{'released' if h.decision.released else 'denied'} | {h.awarded:g}/{o.points:g}"


def export_class(*, book: Gradebook, assignment_id: str, out: Path) -> Path:
    """Write the exports of `assignment_id` under `out`/<assignment>/export/; returns that folder."""
    folder = out / assignment_id / "export"
    grades = student_grades(book, assignment_id)
    atomic.write_text(folder / "grades.csv", lms_csv(grades))
    atomic.write_text(folder / "report.md", class_markdown(assignment_id, grades))
    atomic.write_text(folder / "reviews.csv", reviews_csv(book, assignment_id))
    class_png(folder / "report.png", assignment_id, grades)
    for g in grades:
        name = safe_name(g.row["student"])
        atomic.write_text(folder / "students" / f"{name}.md", _student_markdown(g))
        if (data := _student_results(out, g, book)) is not None:
            atomic.write_text(folder / "students" / f"{name}.json", json.dumps(data, indent=1))
    return folder
