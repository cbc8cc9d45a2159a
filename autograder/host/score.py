"""Score: points for passed tests; perf tests earn partial credit between their bars.

A perf test's credit is the mean over its recorded metrics that have a threshold for this
hardware tag; with none, the test is "not graded here" (neither earned nor counted).
"""

from __future__ import annotations

from autograder.host.results import FAILED, NOT_GRADED, PASSED, TestResult
from autograder.host.spec import AssignmentSpec


def score_all(results: list[TestResult], spec: AssignmentSpec, hardware: str) -> None:
    for result in results:
        result.score = 0.0
        if result.status != PASSED:
            continue
        if result.test.perf:
            _score_perf(result, spec, hardware)
        else:
            result.score = result.test.points


def _score_perf(result: TestResult, spec: AssignmentSpec, hardware: str) -> None:
    if not result.metrics:
        result.status, result.reason = FAILED, "the perf test recorded no metric (perf.record was never called)"
        return
    fractions = []
    for name, value in sorted(result.metrics.items()):
        metric = spec.perf.get(name)
        bar = metric.thresholds.get(hardware) if metric else None
        if metric is None or bar is None:
            result.perf_notes.append(f"{name} = {value:.4g} (no bar for {hardware})")
            continue
        fraction = bar.fraction(value, metric.higher_is_better)
        fractions.append(fraction)
        direction = ">=" if metric.higher_is_better else "<="
        result.perf_notes.append(
            f"{name} = {value:.4g}{_unit(metric.unit)}: pass {direction} {bar.pass_bar:g}, full {direction} "
            f"{bar.full_bar:g} on {hardware} -> {fraction:.0%}"
        )
    if not fractions:
        result.status = NOT_GRADED
        result.reason = f"not graded here: no perf threshold for hardware '{hardware}'"
        return
    result.score = result.test.points * sum(fractions) / len(fractions)


def _unit(unit: str) -> str:
    """'x' and '%' follow the number (2.5x); a word unit is spaced (0.27 fraction)."""
    return unit if unit in ("", "x", "%") else f" {unit}"
