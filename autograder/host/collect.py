"""Collect: what the trusted side expects, what the sandbox reported, and the two reconciled.

Expected tests come from a collection run over the master tests with *trusted* package code (the
reference, or the generated stub), never the submission. Reported results are signed JSON lines;
any result that is missing, duplicated, unsigned or forged makes the test fail with the reason.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from autograder.errors import GraderError
from autograder.host.attachments import from_record
from autograder.host.course_files import counts
from autograder.host.judge_command import AUTOLOAD_OFF, judge_argv
from autograder.host.results import ERROR, FAILED, HELD, NOT_GRADED, PASSED, ExpectedTest, TestResult
from autograder.protocol.messages import RecordKind
from autograder.protocol.run import OPT_RUN, RunDescription
from autograder.sandbox import RunResult

STATUSES = {PASSED, FAILED, ERROR, NOT_GRADED, HELD}  # HELD: the judge's HeldForReview (no points)


@dataclass
class Reported:
    """The verified content of one results file."""

    tests: dict[str, list[dict]] = field(default_factory=dict)
    collect_errors: list[str] = field(default_factory=list)
    forged: int = 0
    session_ended: bool = False


def read_reported(path: Path, key: bytes) -> Reported:
    reported = Reported()
    if not path.is_file():
        return reported
    for line in path.read_text(errors="replace").splitlines():
        try:
            envelope = json.loads(line)
            body = envelope["body"]
            good = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
            if not hmac.compare_digest(good, str(envelope["mac"])):
                raise ValueError("bad signature")
            record = json.loads(body)
        except (ValueError, KeyError, TypeError):
            reported.forged += 1
            continue
        kind = record.get("kind")
        if kind == RecordKind.TEST.value:
            reported.tests.setdefault(str(record.get("nodeid")), []).append(record)
        elif kind == RecordKind.COLLECT_ERROR.value:
            reported.collect_errors.append(str(record.get("message", "")))
        elif kind == RecordKind.SESSION_END.value:
            reported.session_ended = True
    return reported


def _missing_reason(reported: Reported, run: RunResult) -> str:
    if reported.collect_errors:
        return "the test file could not be collected (import error?):\n" + reported.collect_errors[0][-1500:]
    if run.timed_out or run.signal_name or (run.returncode not in (0, 1) and not reported.session_ended):
        return run.describe()
    if not reported.session_ended:
        return f"the test process stopped early (exit status {run.returncode}) before reporting this test"
    return "no result was reported for this test"


def reconcile(expected: list[ExpectedTest], reported: Reported, run: RunResult) -> list[TestResult]:
    """One result per expected test; nothing reported is ever taken as a pass."""
    results = []
    for test in expected:
        records = reported.tests.get(test.nodeid, [])
        if reported.forged:
            results.append(TestResult(test, FAILED, f"{reported.forged} result line(s) failed verification: "
                                      "results were tampered with"))
        elif not records:
            results.append(TestResult(test, FAILED, _missing_reason(reported, run), output=run.output[-1500:]))
        elif len(records) > 1:
            results.append(TestResult(test, FAILED, f"{len(records)} results were reported for one test"))
        else:
            results.append(_from_record(test, records[0]))
    return results


def _from_record(test: ExpectedTest, record: dict) -> TestResult:
    status = record.get("status")
    metrics = record.get("metrics", {})
    if status not in STATUSES or not isinstance(metrics, dict):
        return TestResult(test, FAILED, f"malformed result record (status={status!r})")
    try:
        metrics = {str(k): float(v) for k, v in metrics.items()}
        duration = float(record.get("duration", 0.0))
    except (TypeError, ValueError):
        return TestResult(test, FAILED, "malformed metrics in the result record")
    return TestResult(test, status, str(record.get("reason", "")), str(record.get("output", "")),
                      duration, metrics, attachments=from_record(record.get("attachments", [])))


def unexpected(expected: list[ExpectedTest], reported: Reported) -> list[str]:
    known = {t.nodeid for t in expected}
    return sorted(set(reported.tests) - known)


def collect_expected(workdir: Path, env: dict[str, str], cache: Path | None, package: str,
                     given: tuple[str, ...] = ()) -> list[ExpectedTest]:
    """Run pytest --collect-only over trusted code in `workdir`; GraderError on authoring errors.
    The package loads in a worker as in a graded run, so test ids come out the same."""
    digest = _tree_digest(workdir)
    cached = cache / f"manifest-{digest}.json" if cache else None
    if cached and cached.is_file():
        return _parse_manifest(json.loads(cached.read_text()))
    manifest = workdir / ".manifest.json"
    run = RunDescription(package=package, given=tuple(given), manifest=str(manifest)).write(workdir / ".run.json")
    folders = [a for a in ("tests", "hidden") if (workdir / a).is_dir()]
    argv = judge_argv("--collect-only", "-q", OPT_RUN, str(run), "-p", "no:cacheprovider", "-o", "pythonpath=.",
                      "--rootdir", str(workdir), *folders)
    proc = subprocess.run(argv, cwd=workdir, env=env | AUTOLOAD_OFF, capture_output=True, text=True, timeout=600,
                          check=False)
    if not manifest.is_file():
        raise GraderError(f"could not collect the master tests:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    data = json.loads(manifest.read_text())
    if data["errors"]:
        first = data["errors"][0]
        raise GraderError(f"the master tests fail to collect with trusted code: {first['nodeid']}\n{first['message']}")
    if cached:  # written whole, then renamed: gradings running side by side may read it at any moment
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f".{cached.name}.{os.getpid()}.{threading.get_ident()}")
        partial.write_text(json.dumps(data))
        os.replace(partial, cached)
    return _parse_manifest(data)


def _parse_manifest(data: dict) -> list[ExpectedTest]:
    return [ExpectedTest(t["nodeid"], t["file"], float(t["points"]), bool(t["gpu"]), bool(t["perf"]),
                         int(t.get("world_size", 1)))
            for t in data["tests"]]


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256(b"autograder-manifest-v1")
    for part in ("judge/plugin.py", "judge/recorder.py", "judge/proxies.py", "judge/codec.py", "judge/replies.py"):
        h.update((Path(__file__).parent.parent / part).read_bytes())
    for path in sorted(root.rglob("*")):
        if path.is_file() and counts(path.relative_to(root)):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:24]
