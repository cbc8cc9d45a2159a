"""Grade one assignment: stage -> sandbox -> collect -> score, one sandboxed pytest per test file."""

from __future__ import annotations

import os
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.hardware import hardware_tag
from autograder.host.attachments import verify as verify_attachments
from autograder.host.collect import collect_expected, read_reported, reconcile, unexpected
from autograder.errors import GraderError
from autograder.host.probe import IMPORT_TIMEOUT_S, ImportProbe, hang_reason, probe_argv, read_probe, setup_error
from autograder.host.progress import Progress, Tally
from autograder.host.render import given_packages, render_package
from autograder.host.repo import Course
from autograder.host.results import ERROR, FAILED, AssignmentResult, ExpectedTest, TestResult
from autograder.host.scan import array_library_imports, hold_flagged, scan_package
from autograder.host.score import score_all
from autograder.host.spec import AssignmentSpec
from autograder.host.stage import (
    TEST_DIRS,
    cleanup,
    new_root,
    read_no_follow,
    stage,
    student_package,
    walk_no_links,
)
from autograder.host.written import grade_written
from autograder.protocol.attachments import ATTACHMENTS_DIR
from autograder.protocol.run import OPT_KEY_FD, OPT_RUN, RUN_FILE, RunDescription
from autograder.sandbox import Backend, RunRequest, select_backend

GRADER_ROOT = Path(__file__).resolve().parents[2]  # the checkout holding autograder/
JUDGE_DIR = ".judge"  # the judge's records: covered in the worker's own view
RESULTS_FILE = f"{JUDGE_DIR}/results.jsonl"
STALL_MARGIN_S = 20.0  # a batch run may go this long past a test's timeout without a new record


def _base_env(workdir: Path, threads: int) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir / "home"), "TMPDIR": str(workdir / "tmp"),
        "PYTHONPATH": os.pathsep.join([str(workdir), str(GRADER_ROOT)]),
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
class _Job:
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
        env = _base_env(workdir, self.threads) | {"AUTOGRADER_HARDWARE": self.hardware}
        return RunRequest(argv=argv, workdir=workdir, env=env, wall_s=wall_s, memory_mb=self.spec.limits.memory_mb,
                          gpu=self.hardware != "cpu", hide=hide, expose=expose, **kw)


def _run_files(job: _Job, name: str, test_files: list[str], *, batch: bool) -> tuple[dict[str, list[TestResult]], list[str]]:
    """One sandboxed pytest over `test_files`; results per file, and notes.

    A batch run has a stall watchdog (no new record for a test's timeout plus a margin) and a wall
    limit of all its files' limits together; an isolated run has the per-file wall limit only.
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
    argv = [sys.executable, "-m", "pytest", *test_files, "-p", "autograder.judge.plugin",
            OPT_RUN, str(run.write(results_file.parent / RUN_FILE)), "-p", "no:cacheprovider",
            "-o", "pythonpath=.", "--rootdir", str(workdir), "-q", "--no-header",
            "--continue-on-collection-errors", f"--timeout={spec.limits.test_timeout_s:g}",
            *(["--maxfail=1"] if job.first_failure else [])]
    # The master tests and support files stay read-only: the worker starts while the judge is still
    # collecting, and must not rewrite a test before the judge imports it.
    read_only = tuple(p for p in workdir.iterdir() if p.name not in (*spec.packages, "home", "tmp", JUDGE_DIR))
    ranks = max((t.world_size for t in job.expected if t.file in test_files and t.world_size > 1), default=0)
    request = job.request(argv, workdir, spec.limits.file_timeout_s * len(test_files),
                          secret=key, secret_flag=OPT_KEY_FD,  # the backend says where the judge reads it
                          read_only=read_only,
                          progress_file=results_file if batch else None,
                          stall_s=spec.limits.test_timeout_s + STALL_MARGIN_S if batch else None,
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


def grade_assignment(
    *,
    course: Course,
    assignment_id: str,
    solution: bool = False,
    submission: Path | None = None,
    sandbox: str = "auto",
    hardware: str | None = None,
    jobs: int | None = None,
    only_files: list[str] | None = None,
    progress: Progress | None = None,
    import_timeout_s: float = IMPORT_TIMEOUT_S,
    probe: bool = True,
    first_failure: bool = False,
) -> AssignmentResult:
    """Grade the student's copy (default), the reference (`solution`) or a `submission` folder.

    `import_timeout_s` bounds the probe that imports the package once before any test runs;
    `probe=False` skips it (a broken variant of the reference: it imports, and only its score counts).
    `first_failure` stops each run at its first failed test and keeps only the tests that reported
    (a broken variant needs one lost point, not all of them): the result is then partial.
    """
    start = time.monotonic()
    spec = course.spec(assignment_id)
    master_dir = course.master_dir(assignment_id)
    solution_dir = course.solution_dir(assignment_id)
    if solution and solution_dir is None:
        raise GraderError(f"--solution needs solutions/{assignment_id}, which this checkout does not have")
    if submission is not None and not submission.is_dir():
        raise GraderError(f"the submission folder {submission} does not exist (or is not a folder): "
                          "check the path given to --submission")
    source_dir = submission or (solution_dir if solution else course.student_dir(assignment_id))
    if not (source_dir / spec.package).is_dir():
        raise GraderError(f"{source_dir}: no package folder {spec.package!r} to grade")
    tag = hardware_tag(hardware)
    backend = select_backend(sandbox, gpu=tag != "cpu")
    given = given_packages(course, spec)
    base = render_package(solution_dir, spec.packages, spec.task_prefix, given) if solution_dir else {}
    # The collection run imports the package it is given outside the sandbox: the reference, or where
    # this checkout has none the course's own copy in assignments/, never a submission from elsewhere
    # (grading in place, that copy is the student's own work on their own machine).
    trusted = given | _package_files(solution_dir or course.student_dir(assignment_id), spec)
    package = student_package(source_dir, spec, base, solution=solution)
    root = new_root()
    try:
        expected = _collect(course, spec, master_dir, trusted, root)
        files = sorted({t.file for t in expected if only_files is None or t.file in only_files})
        # an early stop wants one process over every file: it ends at the first failure in any of them
        workers = 1 if first_failure else jobs or (min(len(files), os.cpu_count() or 1) if tag == "cpu" else 1)
        threads = max(1, (os.cpu_count() or 1) // max(1, workers))
        result = AssignmentResult(assignment_id, spec.title, tag, backend.name,
                                  "solution" if solution else str(submission) if submission else "student",
                                  hidden_available=(master_dir / "hidden").is_dir() and only_files is None)
        result.notes.extend(backend.notes() + package.notes)
        flagged = [] if solution else scan_package(package.files, base)  # holds passed tests (below)
        tally = Tally(sum(t.file in files for t in expected), progress) if progress else None
        job = _Job(backend, spec, course, root, master_dir, package.files, expected, tag, threads,
                   first_failure=first_failure, tally=tally, reference=solution)
        if refused := _refused(spec, package.files, base):
            result.notes.insert(0, refused)
            result.tests = [TestResult(t, FAILED, refused) for t in expected if t.file in files]
        else:
            if probe:
                _probe_and_grade(job, files, workers, result, import_timeout_s)
            else:
                _grade_files(job, files, workers, result)
    finally:
        cleanup(root)
    if only_files is None:
        result.tests += grade_written(spec, source_dir)
    score_all(result.tests, spec, tag)
    if note := hold_flagged(result.tests, flagged):  # after scoring: a perf test for other hardware stays so
        result.notes.insert(0, note)
    result.wall_s = time.monotonic() - start
    return result


def _collect(course: Course, spec: AssignmentSpec, master_dir: Path, trusted: dict[Path, bytes],
             root: Path) -> list[ExpectedTest]:
    """The master tests' ids, points and marks, collected over trusted code (cached by content)."""
    collect_dir = stage(root=root, name="collect", master_dir=master_dir, spec=spec, package_files=trusted,
                        test_files=None)
    return collect_expected(collect_dir, _base_env(collect_dir, 1), course.cache_dir,
                            spec.package, spec.packages[1:])


def expected_tests(course: Course, assignment_id: str) -> list[ExpectedTest]:
    """Every graded test of an assignment, as the grader expects it (from the reference's package)."""
    spec = course.spec(assignment_id)
    source = course.solution_dir(assignment_id) or course.student_dir(assignment_id)
    root = new_root()
    try:
        return _collect(course, spec, course.master_dir(assignment_id),
                    given_packages(course, spec) | _package_files(source, spec), root)
    finally:
        cleanup(root)


def _refused(spec: AssignmentSpec, files: dict[Path, bytes], base: dict[Path, bytes]) -> str:
    """Why the package is not graded at all ("" when it is): a kernel exercise computes in its
    kernels, not in an array library beside them."""
    arrays = array_library_imports(files, base) if spec.accounting.compute_in_kernels else []
    if not arrays:
        return ""
    return ("not graded: in this kernel exercise the package may not import an array library that computes "
            "outside torch: " + "; ".join(arrays[:5]))


def _probe_and_grade(job: _Job, files: list[str], workers: int, result: AssignmentResult,
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
    _grade_files(replace(job, import_error=probe.error), files, workers, result)


def _probe(job: _Job, timeout_s: float) -> ImportProbe:
    """Import the package once in the sandbox; GraderError when the sandbox cannot even start Python."""
    workdir = stage(root=job.root, name="probe", master_dir=job.master_dir, spec=job.spec, package_files=job.package,
                    test_files=[])
    run = job.backend.run(job.request(probe_argv(sys.executable, job.spec.package), workdir, timeout_s))
    probe = read_probe(run)
    if not probe.grader_ok:
        raise setup_error(run, job.backend.name)
    return probe


def _grade_files(job: _Job, files: list[str], workers: int, result: AssignmentResult) -> None:
    """Batches first; a file a crash, hang or exit cut short is rerun on its own."""
    done: dict[str, list[TestResult]] = {}

    def batch(item: tuple[int, list[str]]) -> None:
        index, group = item
        per_file, notes = _run_files(job, f"batch{index}", group, batch=len(group) > 1)
        result.notes.extend(notes)
        for test_file, tests in per_file.items():
            if tests or job.first_failure:  # after an early stop, a file may have no test that ran
                done[test_file] = tests
                if job.tally:
                    job.tally.saw([t.test.nodeid for t in tests], test_file)

    def isolated(item: tuple[int, str]) -> None:
        index, test_file = item
        per_file, notes = _run_files(job, f"file{index}", [test_file], batch=False)
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


def _package_files(directory: Path, spec: AssignmentSpec) -> dict[Path, bytes]:
    """The regular files of the package and of the given packages found in `directory`; a symbolic
    link is never followed (nor staged)."""
    out: dict[Path, bytes] = {}
    for package in spec.packages:
        files, _links = walk_no_links(directory / package) if (directory / package).is_dir() else ([], [])
        out |= {Path(package) / rel: read_no_follow(directory / package / rel) for rel in files}
    return out


def test_files(course: Course, assignment_id: str) -> list[str]:
    master = course.master_dir(assignment_id)
    return sorted(str(p.relative_to(master)) for d in TEST_DIRS for p in (master / d).glob("test_*.py"))
