"""Score: points for passed tests; perf tests earn partial credit between their bars.

Only a passed test earns: a test held for an instructor's review (HELD, by the judge's HeldForReview
or the tamper scan) earns nothing and counts in no automatic total, like a pending written answer.

A perf test's credit is the mean over its recorded metrics that have a threshold for this
hardware tag; with none, the test is "not graded here" (neither earned nor counted). A tag without
its own bar takes the bar of a tag of the same GPU family (`hardware.family`: an H100 grades on the
H200's bar), marked provisional in the note with the tag that measured it.
"""

from __future__ import annotations

from autograder.hardware import family
from dataclasses import replace

from autograder.host.results import FAILED, HELD, NOT_GRADED, PASSED, TestResult
from autograder.host.spec import AssignmentSpec, PerfMetric, Threshold


def score_all(results: list[TestResult], spec: AssignmentSpec, hardware: str) -> None:
    for result in results:
        result.score = 0.0
        if result.status == HELD:
            result.held_score = _would_earn(result, spec, hardware)
        if result.status != PASSED:
            continue
        if result.test.perf:
            _score_perf(result, spec, hardware)
        else:
            result.score = result.test.points


def _would_earn(result: TestResult, spec: AssignmentSpec, hardware: str) -> float:
    """What a held test earns if an instructor releases it: its points, or a perf test's credit
    from the metrics it recorded (none recorded: nothing)."""
    if not result.test.perf:
        return result.test.points
    if not result.metrics:
        return 0.0
    probe = replace(result, status=PASSED, perf_notes=[])
    _score_perf(probe, spec, hardware)
    result.perf_notes = probe.perf_notes
    return probe.score


def _score_perf(result: TestResult, spec: AssignmentSpec, hardware: str) -> None:
    if not result.metrics:
        result.status, result.reason = FAILED, "the perf test recorded no metric (perf.record was never called)"
        return
    fractions = []
    for name, value in sorted(result.metrics.items()):
        metric = spec.perf.get(name)
        bar, measured_on = _bar(metric, hardware) if metric else (None, None)
        if metric is None or bar is None:
            result.perf_notes.append(f"{name} = {value:.4g} (no bar for {hardware})")
            continue
        fraction = bar.fraction(value, metric.higher_is_better)
        fractions.append(fraction)
        direction = ">=" if metric.higher_is_better else "<="
        where = hardware if measured_on == hardware else (
            f"{hardware}, provisional: the bar measured on {measured_on} (same {family(hardware)} family) "
            f"until `calibrate --write` on {hardware}")
        result.perf_notes.append(
            f"{name} = {value:.4g}{_unit(metric.unit)}: pass {direction} {bar.pass_bar:g}, full {direction} "
            f"{bar.full_bar:g} on {where} (measured in {bar.env}) -> {fraction:.0%}"
        )
    if not fractions:
        result.status = NOT_GRADED
        result.reason = f"not graded here: no perf threshold for hardware '{hardware}'"
        return
    result.score = result.test.points * sum(fractions) / len(fractions)


def _bar(metric: PerfMetric, hardware: str) -> tuple[Threshold | None, str | None]:
    """(the bar, the tag it was measured on): this tag's own, else a same-family sibling's (the first
    in name order, so the choice is stable), else (None, None)."""
    if hardware in metric.thresholds:
        return metric.thresholds[hardware], hardware
    kin = family(hardware)
    siblings = sorted(tag for tag in metric.thresholds if kin is not None and family(tag) == kin)
    return (metric.thresholds[siblings[0]], siblings[0]) if siblings else (None, None)


def _unit(unit: str) -> str:
    """'x' and '%' follow the number (2.5x); a word unit is spaced (0.27 fraction)."""
    return unit if unit in ("", "x", "%") else f" {unit}"
