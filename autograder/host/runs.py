"""One grading's sandboxed runs: the job they share (limits, exposures, environment), the test
files dealt into batches (public apart from hidden), the import probe, and each run's pytest with
its records read back and reconciled against the trusted manifest."""

from __future__ import annotations

import os
import secrets
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.host.attachments import verify as verify_attachments
from autograder.host.collect import read_reported, reconcile, unexpected
from autograder.host.judge_command import AUTOLOAD_OFF, judge_argv
from autograder.host.probe import ImportProbe, hang_reason, probe_argv, read_probe, setup_error
from autograder.host.progress import Tally
from autograder.host.repo import GRADER_ROOT, Course
from autograder.host.results import ERROR, FAILED, AssignmentResult, ExpectedTest, TestResult
from autograder.host.spec import AssignmentSpec
from autograder.host.stage import stage
from autograder.protocol.attachments import ATTACHMENTS_DIR
from autograder.protocol.run import MAX_STRETCH, OPT_KEY_FD, OPT_RUN, RUN_FILE, RunDescription
from autograder.sandbox import Backend, RunRequest

JUDGE_DIR = ".judge"  # the judge's records: covered in the worker's own view
RESULTS_FILE = f"{JUDGE_DIR}/results.jsonl"
STALL_MARGIN_S = 20.0  # a batch run may go this long past a test's longest wall time without a new record


def base_env(workdir: Path, threads: int) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir / "home"), "TMPDIR": str(workdir / "tmp"),
        "PYTHONPATH": os.pathsep.join([str(workdir), str(GRADER_ROOT)]),
        **AUTOLOAD_OFF,  # the judge names its plugins (host/judge_command.py)
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg",
        "TRITON_CACHE_DIR": str(workdir / "tmp" / "triton"), "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
        # the judge and its worker take turns: OpenMP threads that spin after a parallel region would
        # steal the other process's cores (a 1 MB tensor crossing took 7 ms instead of 0.9)
        "OMP_WAIT_POLICY": "PASSIVE",
        # the sandbox uid has no passwd entry: getpass.getuser() (torch inductor caches) reads these
        "USER": "student", "LOGNAME": "student",
    }
    # COVERAGE_PROCESS_START: `autograder tasks` measures which tasks the public tests reach (authoring/taskmap.py);
    # AUTOGRADER_HYPOTHESIS_PROFILE=thorough: model-based hidden tests draw 10x the examples (`make variants`)
    for passthrough in ("CUDA_VISIBLE_DEVICES", "TRITON_INTERPRET", "AUTOGRADER_HARDWARE", "LANG", "LC_ALL",
                        "COVERAGE_PROCESS_START", "AUTOGRADER_HYPOTHESIS_PROFILE"):
        if passthrough in os.environ:
            env[passthrough] = os.environ[passthrough]
    return env


def _exposed(course: Course) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(hidden trees, read-only exposures): hide the course repo, keep the grader, venv and data."""
    repo = GRADER_ROOT
    expose = [repo / "autograder", repo / "datasets", repo / "coursedata"]
    prefix = Path(sys.prefix).resolve()
    if repo in prefix.parents:
        expose.append(prefix)
    hide = [repo] + ([course.root] if course.root != repo and course.root not in repo.parents else [])
    return tuple(hide), tuple(expose)


@dataclass(frozen=True)
class Job:
    """What every sandboxed run of one grading shares."""

    backend: Backend
    spec: AssignmentSpec
    course: Course
    root: Path
    master_dir: Path
    package: dict[Path, bytes]
    expected: list[ExpectedTest]
    hardware: str
    threads: int
    import_error: str = ""  # from the probe: prefixed to the reason of every test that reported nothing
    first_failure: bool = False  # stop each run at its first failed test; keep only the tests that reported
    tally: Tally | None = None  # progress test by test, when the caller asked for it
    reference: bool = False  # the course's own solution: hidden tests report their messages in full

    def request(self, argv: list[str], workdir: Path, wall_s: float, **kw: object) -> RunRequest:
        """The sandboxed run of `argv` in `workdir`, with this grading's limits, exposures and env."""
        hide, expose = _exposed(self.course)
        env = base_env(workdir, self.threads) | {"AUTOGRADER_HARDWARE": self.hardware}
        return RunRequest(argv=argv, workdir=workdir, env=env, wall_s=wall_s, memory_mb=self.spec.limits.memory_mb,
                          gpu=self.hardware != "cpu", hide=hide, expose=expose, **kw)


def run_files(job: Job, name: str, test_files: list[str], *, batch: bool) -> tuple[dict[str, list[TestResult]], list[str]]:
    """One sandboxed pytest over `test_files`; results per file, and notes.

    A batch run has a stall watchdog (no new record for a test's longest wall time plus a margin)
    and a wall limit of all its files' limits together; an isolated run has the per-file wall limit
    only. Both allow for a busy host: MAX_STRETCH times the limits.
    """
    spec = job.spec
    workdir = stage(root=job.root, name=name, master_dir=job.master_dir, spec=spec, package_files=job.package,
                    test_files=[Path(f) for f in test_files])
    key = secrets.token_bytes(32)
    results_file = workdir / RESULTS_FILE
    results_file.parent.mkdir()
    attachments = workdir / ATTACHMENTS_DIR  # the worker may reach these: the host keeps only bytes whose hash is signed
    run = RunDescription(package=spec.package, given=tuple(spec.packages[1:]), forbidden=tuple(spec.limits.forbidden),
                         accounting=spec.accounting.to_json(), results=str(results_file), attachments=str(attachments),
                         worker_hides=_worker_hides(workdir, test_files), reveal_hidden=job.reference)
    argv = judge_argv(*test_files, OPT_RUN, str(run.write(results_file.parent / RUN_FILE)), "-p", "no:cacheprovider",
                      "-o", "pythonpath=.", "--rootdir", str(workdir), "-q", "--no-header",
                      "--continue-on-collection-errors", f"--timeout={spec.limits.test_timeout_s:g}",
                      *(["--maxfail=1"] if job.first_failure else []))
    # The master tests and support files stay read-only: the worker starts while the judge is still
    # collecting, and must not rewrite a test before the judge imports it.
    read_only = tuple(p for p in workdir.iterdir() if p.name not in (*spec.packages, "home", "tmp", JUDGE_DIR))
    ranks = max((t.world_size for t in job.expected if t.file in test_files and t.world_size > 1), default=0)
    # Each test's limit counts its own time and may stretch up to MAX_STRETCH on the wall clock of a
    # busy host (judge/own_time.py); the files' wall limit stretches with them, or a loaded host
    # would kill a batch whose every test is within its limit.
    request = job.request(argv, workdir, spec.limits.file_timeout_s * len(test_files) * MAX_STRETCH,
                          secret=key, secret_flag=OPT_KEY_FD,  # the backend says where the judge reads it
                          read_only=read_only,
                          progress_file=results_file if batch else None,
                          stall_s=spec.limits.test_timeout_s * MAX_STRETCH + STALL_MARGIN_S if batch else None,
                          processes=1 + ranks)
    if job.tally is None:
        run = job.backend.run(request)
    else:
        with job.tally.watching(results_file, key, {t.nodeid for t in job.expected if t.file in test_files}):
            run = job.backend.run(request)
    reported = read_reported(results_file, key)
    notes = [f"unexpected result for {n} ignored" for n in unexpected(job.expected, reported)]
    per_file = {}
    for test_file in test_files:
        expected = [t for t in job.expected if t.file == test_file]
        per_file[test_file] = reconcile(expected, reported, run)
        if job.first_failure:  # a test the early stop left unrun is neither passed nor failed
            per_file[test_file] = [t for t in per_file[test_file] if t.test.nodeid in reported.tests]
            continue
        if job.import_error:  # the likely cause of every failed or silent test, said first
            for t in per_file[test_file]:
                if t.status in (FAILED, ERROR) or t.test.nodeid not in reported.tests:
                    t.reason = f"the package does not import: {job.import_error}\n{t.reason}"
        if batch and any(t.nodeid not in reported.tests for t in expected):
            per_file[test_file] = []  # incomplete: the caller reruns this file on its own
    for tests in per_file.values():  # what the judge attached, read before the work dir is removed
        notes += verify_attachments(tests, attachments)
    return per_file, notes


def _worker_hides(workdir: Path, test_files: list[str]) -> tuple[str, ...]:
    """What the worker's own mount view covers: the folders of this run's test files and the
    judge's folder. The worker keeps the package, the master conftest and the data."""
    folders = sorted({str(workdir / Path(f).parts[0]) for f in test_files if len(Path(f).parts) > 1})
    return (*folders, str(workdir / JUDGE_DIR))


def _groups(files: list[str], workers: int) -> list[list[str]]:
    """Batches of test files: public and hidden files never share one (a hidden file's text must
    not reach a run whose output is shown at once), and together they take at most `workers`
    batches where there are that many (one each otherwise), so the number of sandboxed runs stays
    what it was. A file whose name repeats one already in its batches (tests/test_x.py and
    hidden/test_x.py) runs on its own, as pytest would refuse to import both into one process."""
    public = [f for f in files if not f.startswith("hidden/")]
    hidden = [f for f in files if f.startswith("hidden/")]
    if not (public and hidden):
        return _deal(public or hidden, workers)
    for_public = max(1, min(len(public), round(workers * len(public) / len(files))))
    for_hidden = max(1, min(len(hidden), workers - for_public))
    return _deal(public, for_public) + _deal(hidden, for_hidden)


def _deal(files: list[str], workers: int) -> list[list[str]]:
    """Files dealt round-robin into at most `workers` batches; a repeated file name runs alone."""
    count = max(1, min(workers, len(files)))
    groups: list[list[str]] = [[] for _ in range(count)]
    solo, seen = [], set()
    for i, test_file in enumerate(files):
        if Path(test_file).name in seen:
            solo.append([test_file])
            continue
        seen.add(Path(test_file).name)
        groups[i % count].append(test_file)
    return [g for g in groups if g] + solo


def probe_and_grade(job: Job, files: list[str], workers: int, result: AssignmentResult,
                     timeout_s: float) -> None:
    """Import the package once; grade the files unless the import hung."""
    probe = _probe(job, timeout_s)
    if probe.no_view:
        result.notes.append(f"the submission's process could read its run's test files ({probe.no_view}): "
                            "public and hidden tests still ran apart, and no hidden test shows its output")
    if probe.hung:
        result.notes.insert(0, hang_reason(timeout_s))
        result.tests = [TestResult(t, FAILED, hang_reason(timeout_s)) for t in job.expected if t.file in files]
        return
    if probe.error:
        result.notes.insert(0, f"the package does not import: {probe.error}")
    grade_files(replace(job, import_error=probe.error), files, workers, result)


def _probe(job: Job, timeout_s: float) -> ImportProbe:
    """Import the package once in the sandbox; GraderError when the sandbox cannot even start Python."""
    workdir = stage(root=job.root, name="probe", master_dir=job.master_dir, spec=job.spec, package_files=job.package,
                    test_files=[])
    run = job.backend.run(job.request(probe_argv(sys.executable, job.spec.package), workdir, timeout_s))
    probe = read_probe(run)
    if not probe.grader_ok:
        raise setup_error(run, job.backend.name)
    return probe


def grade_files(job: Job, files: list[str], workers: int, result: AssignmentResult) -> None:
    """Batches first; a file a crash, hang or exit cut short is rerun on its own."""
    done: dict[str, list[TestResult]] = {}

    def batch(item: tuple[int, list[str]]) -> None:
        index, group = item
        per_file, notes = run_files(job, f"batch{index}", group, batch=len(group) > 1)
        result.notes.extend(notes)
        for test_file, tests in per_file.items():
            if tests or job.first_failure:  # after an early stop, a file may have no test that ran
                done[test_file] = tests
                if job.tally:
                    job.tally.saw([t.test.nodeid for t in tests], test_file)

    def isolated(item: tuple[int, str]) -> None:
        index, test_file = item
        per_file, notes = run_files(job, f"file{index}", [test_file], batch=False)
        result.notes.extend(notes)
        done[test_file] = per_file[test_file]
        if job.tally:
            job.tally.saw([t.test.nodeid for t in per_file[test_file]], test_file)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(batch, enumerate(_groups(files, workers))))
        rerun = [f for f in files if f not in done]
        list(pool.map(isolated, enumerate(rerun)))
    for test_file in files:
        result.tests.extend(done[test_file])
