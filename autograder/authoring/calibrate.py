"""Calibrate: run the reference's perf tests here and propose bars for this hardware tag.

By default pass = 0.6x and full = 0.9x of the reference's value for higher-is-better metrics (and
value/0.6, value/0.9 for lower-is-better). `write=True` puts them into the assignment.toml under
`[perf.<metric>.thresholds]` with the environment of course/versions.toml it runs in (`env`), and a
comment naming the device, software versions and the value.
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autograder.hardware import hardware_tag
from autograder.host import report, result_files
from autograder.errors import GraderError
from autograder.host.grade import expected_tests, grade_assignment
from autograder.host.repo import Course
from autograder.versions import environment_here


@dataclass(frozen=True)
class Proposal:
    metric: str
    value: float
    pass_bar: float
    full_bar: float
    higher_is_better: bool


def _software() -> str:
    parts = []
    try:
        import torch

        device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
        parts += [device, f"torch {torch.__version__}"]
    except ImportError:
        parts.append("no torch")
    try:
        import triton

        parts.append(f"triton {triton.__version__}")
    except ImportError:
        pass
    return ", ".join(parts)


def propose(values: dict[str, list[float]], higher: dict[str, bool], pass_factor: float,
            full_factor: float) -> list[Proposal]:
    out = []
    for name, samples in sorted(values.items()):
        v = statistics.median(samples)
        if higher[name]:
            out.append(Proposal(name, v, pass_factor * v, full_factor * v, True))
        else:
            out.append(Proposal(name, v, v / pass_factor, v / full_factor, False))
    return out


def set_threshold(text: str, metric: str, tag: str, bar: Proposal, comment: str, env: str) -> str:
    """Put `tag = { pass, full, env }` under [perf.<metric>.thresholds] in a TOML text (added if absent)."""
    line = f'{tag} = {{ pass = {bar.pass_bar:.4g}, full = {bar.full_bar:.4g}, env = "{env}" }}  # {comment}\n'
    lines = text.splitlines(keepends=True)
    header = f"[perf.{metric}.thresholds]"
    if not any(row.strip() == header for row in lines):
        section = f"[perf.{metric}]"
        start = next((i for i, row in enumerate(lines) if row.strip() == section), None)
        if start is None:
            raise GraderError(f"assignment.toml has no [perf.{metric}] table for a recorded metric")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        lines = [row for i, row in enumerate(lines) if not (start < i < end and re.match(r"\s*thresholds\s*=\s*\{\s*\}", row))]
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        lines[end:end] = [header + "\n"]
    at = next(i for i, row in enumerate(lines) if row.strip() == header)
    end = next((i for i in range(at + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    kept = [row for row in lines[at + 1 : end] if not re.match(rf"\s*{re.escape(tag)}\s*=", row)]
    return "".join(lines[: at + 1] + [line] + kept + lines[end:])


def calibrate(*, course: Course, assignment_id: str, repeats: int = 1, pass_factor: float = 0.6,
              full_factor: float = 0.9, write: bool = False, sandbox: str = "auto",
              say: Callable[[str], None] = print, json_path: Path | None = None,
              perf_only: bool = False) -> list[Proposal]:
    """Grade the reference `repeats` times (only its perf tests' files with `perf_only`: a bar needs
    nothing else, and a long hidden suite need not run on a rented GPU) and propose bars from the
    median of each graded metric; `write` puts them into its assignment.toml."""
    tag = hardware_tag()
    env = environment_here(course.root).name if write else "?"  # a bar names the software it was measured with
    spec = course.spec(assignment_id)
    values: dict[str, list[float]] = {}
    only = sorted({t.file for t in expected_tests(course, assignment_id) if t.perf}) if perf_only else None
    for _ in range(repeats):
        result = grade_assignment(course=course, assignment_id=assignment_id, solution=True, sandbox=sandbox,
                                  only_files=only)
        report.print_result(result)
        if json_path:
            result_files.write_json(json_path, [result])
        for t in result.tests:
            if t.test.perf and t.status in ("passed", "not_graded"):
                for name, value in t.metrics.items():
                    values.setdefault(name, []).append(value)
            elif t.test.perf:
                say(f"{t.test.nodeid}: {t.status} ({t.reason.splitlines()[0] if t.reason else ''})")
    graded = {n: v for n, v in values.items() if n in spec.perf}
    for name in sorted(set(values) - set(graded)):
        say(f"{name} = {statistics.median(values[name]):.4g} (reported only: no [perf.{name}] table)")
    proposals = propose(graded, {n: spec.perf[n].higher_is_better for n in graded}, pass_factor, full_factor)
    stamp = f"calibrated {dt.date.today()} on {_software()}"
    path = course.solution_dir(assignment_id) / "assignment.toml" if course.solution_dir(assignment_id) else None
    text = path.read_text() if path else ""
    for p in proposals:
        say(f"{p.metric}: reference {p.value:.4g} -> {tag} pass {p.pass_bar:.4g}, full {p.full_bar:.4g}")
        text = set_threshold(text, p.metric, tag, p, f"{stamp}: reference {p.value:.4g}", env) if path else text
    if write and path and proposals:
        path.write_text(text)
        say(f"wrote {len(proposals)} bar(s) for {tag} into {path}")
    return proposals
