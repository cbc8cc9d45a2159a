"""Mechanical mutation testing: cosmic-ray's operators applied inside the reference's solution regions
of a copy of solutions/<id>, each mutant graded by the real grader; a mutant is killed when it loses
any point. Survivors go to solutions/<id>/mutation.toml, where a reviewer writes each one's verdict."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shlex
import shutil
import signal
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib.metadata import version
from pathlib import Path

from autograder.hardware import hardware_tag
from autograder.host.course_files import ignore
from autograder.errors import GraderError
from autograder.host.grade import grade_assignment
from autograder.host.markers import find_regions
from autograder.host.repo import Course

REPORT = "mutation.toml"
HEADER = """\
# Mechanical mutation testing of the reference's solution regions (`make mutation A={id} MAX={max}`).
# Every survivor lost no point under the full grader. For each, add a test that catches it and write
# verdict = "caught by <test>", or write verdict = "equivalent: <reason>". A rerun keeps the verdicts
# (matched by file, operator and the text of the mutated line, not by line number).
"""


@dataclass(frozen=True)
class Candidate:
    """One mutation cosmic-ray can make: `occurrence` of `operator` in `file` (relative to the copy)."""

    file: str
    line: int  # 1-based, where the mutated node starts
    end_line: int
    operator: str  # cosmic-ray's name, e.g. "core/ReplaceBinaryOperator_Add_Sub"
    occurrence: int

    @property
    def family(self) -> str:
        return self.operator.removeprefix("core/").split("_")[0]


@dataclass(frozen=True)
class Survivor:
    file: str
    line: int
    operator: str
    diff: str
    verdict: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return self.file, self.operator, mutated_text(self.diff)


def region_lines(text: str, filename: str) -> set[int]:
    """1-based numbers of the lines strictly between each region's BEGIN and END markers."""
    return {i + 2 for r in find_regions(text, filename) for i in range(r.begin, r.end - 1)}


def in_regions(candidate: Candidate, lines: set[int]) -> bool:
    return all(n in lines for n in range(candidate.line, candidate.end_line + 1))


def _round_robin(queues: list[list]) -> list:
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def sample(candidates: list[Candidate], max_n: int, seed: int) -> list[Candidate]:
    """A seeded choice of `max_n`, spread over files (in turn) and within each over operator families."""
    rng = random.Random(f"mutation/{seed}")
    by_file: dict[str, dict[str, list[Candidate]]] = {}
    for c in sorted(candidates, key=lambda c: (c.file, c.operator, c.occurrence)):
        by_file.setdefault(c.file, {}).setdefault(c.family, []).append(c)
    queues = []
    for file in sorted(by_file):
        families = [by_file[file][name] for name in sorted(by_file[file])]
        for group in families:
            rng.shuffle(group)
        rng.shuffle(families)
        queues.append(_round_robin(families))
    return _round_robin(queues)[:max_n]


def mutated_text(diff: str) -> str:
    """The mutated line(s) of a unified diff, stripped (the removed ones where nothing was added)."""
    lines = diff.splitlines()
    added = [s[1:].strip() for s in lines if s.startswith("+") and not s.startswith("+++")]
    removed = [s[1:].strip() for s in lines if s.startswith("-") and not s.startswith("---")]
    return "\n".join(added) if added else "-" + "\n".join(removed)


def merge_verdicts(previous: list[Survivor], survivors: list[Survivor],
                   graded: set[tuple[str, str, str]]) -> list[Survivor]:
    """This run's survivors keep the verdicts written for the same mutation; reviewed entries of
    mutations this run did not grade stay; those it graded and killed leave."""
    verdicts = {p.key: p.verdict for p in previous if p.verdict}
    merged = [replace(s, verdict=verdicts.get(s.key, s.verdict)) for s in survivors]
    current = {s.key for s in merged}
    merged += [p for p in previous if p.verdict and p.key not in graded and p.key not in current]
    return sorted(merged, key=lambda s: (s.file, s.line, s.operator, s.diff))


def load_survivors(path: Path) -> list[Survivor]:
    if not path.is_file():
        return []
    try:
        entries = tomllib.loads(path.read_text()).get("survivor", [])
        return [Survivor(e["file"], int(e["line"]), e["operator"], e["diff"], e.get("verdict", "")) for e in entries]
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
        raise GraderError(f"{path}: malformed survivor ({e}); fix it by hand so no verdict is lost") from None


def _toml_str(text: str) -> str:
    if text.endswith("\n") and "'''" not in text and all(ch in "\n\t" or " " <= ch != "\x7f" for ch in text):
        return "'''\n" + text + "'''"  # a literal block, readable in review
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def render(summary: dict[str, object], survivors: list[Survivor]) -> str:
    out = [HEADER.format(id=summary["assignment"], max=summary["max"]), "[summary]"]
    out += [f"{k} = {_toml_str(v) if isinstance(v, str) else v}" for k, v in summary.items()]
    for s in survivors:
        out += ["", "[[survivor]]", f"file = {_toml_str(s.file)}", f"line = {s.line}",
                f"operator = {_toml_str(s.operator)}", f"diff = {_toml_str(s.diff)}", f"verdict = {_toml_str(s.verdict)}"]
    return "\n".join(out) + "\n"


def _clean_diff(diff: str, copy: Path) -> str:
    lines = [s for s in diff.splitlines() if s != "--- mutation diff ---"]
    return "\n".join(s.replace(f"a/{copy}/", "a/").replace(f"b/{copy}/", "b/") for s in lines) + "\n"


def _mutations(copy: Path, package: str, db) -> dict[Candidate, object]:
    """Every mutation cosmic-ray makes in the package's files with regions, inside a region or not."""
    from cosmic_ray.commands.init import init

    files = {p: p.relative_to(copy).as_posix() for p in sorted((copy / package).rglob("*.py"))}
    lines = {p: region_lines(p.read_text(), rel) for p, rel in files.items()}
    init([p for p in files if lines[p]], db, {})
    items = {}
    for item in db.work_items:
        m = item.mutations[0]
        path = Path(m.module_path)
        c = Candidate(files[path], m.start_pos[0], m.end_pos[0], m.operator_name, m.occurrence)
        items[c] = (item, in_regions(c, lines[path]))
    return items


def _grade(command: list[str], out: Path, timeout_s: float, mutation=None) -> tuple[dict, object]:
    """Grade the copy (mutated by cosmic-ray for the run when `mutation` is given): (score record, WorkResult)."""
    from cosmic_ray.mutating import mutate_and_test

    out.unlink(missing_ok=True)
    # cosmic-ray's own limit is a backstop: the command stops itself (and the sandboxes it started) first
    result = mutate_and_test(mutation or [], shlex.join(command + [str(out), str(timeout_s)]), timeout_s + 30)
    record = json.loads(out.read_text()) if out.is_file() else {}
    return record, result


def _outcome(record: dict, result) -> str:
    """One grading as "killed (...)", "survived" or "error: ..."."""
    if result.worker_outcome != "normal" or not record:
        return "error: " + (result.output or "").strip()[-300:]
    if record.get("timed_out"):
        return "killed (timeout)"
    if record["lost"]:
        return f"killed ({record['score']:g}/{record['max_score']:g}, {record['lost'][0]})"
    return "survived"


def run_mutation(*, course: Course, assignment_id: str, max_mutants: int = 40, seed: int = 0,
                 timeout_s: float | None = None, sandbox: str = "auto",
                 say: Callable[[str], None] = print) -> tuple[dict[str, object], list[Survivor]]:
    """Grade a seeded sample of mutants of the reference; write solutions/<id>/mutation.toml."""
    try:
        from cosmic_ray.work_db import use_db
        from cosmic_ray.work_item import WorkerOutcome, WorkResult
    except ImportError:
        raise GraderError("mutation testing needs cosmic-ray: `make mutation A=<id>` installs it") from None
    solution_dir = course.solution_dir(assignment_id)
    if solution_dir is None or max_mutants < 1:
        raise GraderError(f"mutation testing needs solutions/{assignment_id} and at least one mutant")
    counts = {"killed": 0, "survived": 0, "error": 0}
    survivors, graded = [], set()
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp, use_db(Path(tmp) / "session.sqlite") as db:
        copy = Path(tmp) / assignment_id  # never mutate solutions/ in place: others work in that tree
        shutil.copytree(solution_dir, copy, ignore=ignore("hidden", REPORT))
        command = [sys.executable, "-m", "autograder.authoring.mutation", str(course.root), assignment_id, str(copy), sandbox]
        items = _mutations(copy, course.spec(assignment_id).package, db)
        inside = [c for c, (_, inner) in items.items() if inner]
        chosen = sample(inside, max_mutants, seed)
        picked = set(chosen)
        db.set_multiple_results([item.job_id for c, (item, _) in items.items() if c not in picked],
                                WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="not in the sample"))
        say(f"{assignment_id}: {len(inside)} mutations inside solution regions ({len(items)} in those files); "
            f"grading {len(chosen)}")
        start = time.monotonic()
        base, result = _grade(command, Path(tmp) / "base.json", 3600)
        if not _outcome(base, result).startswith("survived"):
            raise GraderError(f"the unmutated copy of the reference loses points here: {_outcome(base, result)}")
        timeout_s = timeout_s or max(60.0, 4 * (time.monotonic() - start))  # 4x the unmutated grading
        say(f"unmutated copy: {base['score']:g}/{base['max_score']:g} in {time.monotonic() - start:.0f} s; "
            f"{timeout_s:.0f} s allowed per mutant")
        for n, c in enumerate(chosen, 1):
            began = time.monotonic()
            record, result = _grade(command, Path(tmp) / "mutant.json", timeout_s, items[c][0].mutations)
            db.set_result(items[c][0].job_id, result)
            mutant = Survivor(c.file, c.line, c.operator, _clean_diff(result.diff or "", copy))
            outcome = _outcome(record, result)
            counts[outcome.split()[0].strip(":")] += 1
            survivors += [mutant] if outcome == "survived" else []
            graded |= {mutant.key} if record else set()
            say(f"[{n}/{len(chosen)}] {c.file}:{c.line} {c.operator}: {outcome}  ({time.monotonic() - began:.0f} s)")
    report = solution_dir / REPORT
    merged = merge_verdicts(load_survivors(report), survivors, graded)
    judged = counts["killed"] + counts["survived"]
    summary = {"assignment": assignment_id, "tool": f"cosmic-ray {version('cosmic-ray')}", "seed": seed,
               "max": max_mutants, "candidates": len(inside), "graded": len(chosen), "killed": counts["killed"],
               "survived": counts["survived"], "errors": counts["error"],
               "kill_rate": round(counts["killed"] / judged, 3) if judged else 0.0,
               "hardware": hardware_tag(), "sandbox": sandbox}
    report.write_text(render(summary, merged))
    return summary, merged


def _kill_descendants() -> None:
    """SIGKILL every process below this one: the sandboxes a grading started run in sessions of their own."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, rest = stat.read_text().split(" (", 1)
            children.setdefault(int(rest.rsplit(") ", 1)[1].split()[1]), []).append(int(pid))
        except (OSError, ValueError, IndexError):
            continue
    todo, found = [os.getpid()], []
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _grade_copy(argv: list[str]) -> int:
    """The test command cosmic-ray runs: grade the copy, write its score; 1 when it lost a point, 2 on an error."""
    root, assignment_id, copy, sandbox, out, limit_s = argv
    record = Path(out)

    def expire(*_: object) -> None:
        record.write_text(json.dumps({"timed_out": True}))
        _kill_descendants()
        os._exit(1)

    signal.signal(signal.SIGALRM, expire)
    signal.alarm(max(1, round(float(limit_s))))
    try:
        result = grade_assignment(course=Course(Path(root)), assignment_id=assignment_id, submission=Path(copy),
                                  sandbox=sandbox)
    except GraderError as e:
        print(f"grading failed: {e}")
        return 2
    lost = [t.test.nodeid for t in result.tests if t.score < t.max_score - 1e-9]
    record.write_text(json.dumps({"score": result.score, "max_score": result.max_score, "lost": lost}))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(_grade_copy(sys.argv[1:]))
