"""What a grading lets the submission see, and what of its output a report shows.

- staging: no rubric (nor any instructor-only file) reaches a run; public and hidden test files
  never share a run; the submission's process (the worker) has its own mount view in which the
  test folders and the judge's records are empty; a hidden test shows none of its output;
- bwrap: nothing of the host is visible but what a grading needs (no class folder, no other
  checkout of the course, no home folder);
- without the rights to make namespaces (root in a container with Docker's default capabilities)
  the grader still grades, and says what it could not enforce.

The attack submissions live in tests/fixtures/tampering/<name>/; each is graded on a copy of the
demo course (tests/fixtures/demo_course), which has hidden tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.host.grade import grade_assignment
from autograder.host.runs import _groups, _worker_hides
from autograder.host.result_files import gradescope
from autograder.host.stage import stage
from autograder.judge import worker_view
from autograder.sandbox import RunRequest
from autograder.sandbox.bwrap import BwrapBackend, _prefixes
from autograder.sandbox.none import NoneBackend

FIXTURES = Path(__file__).parent / "fixtures" / "tampering"
REPO = Path(__file__).resolve().parent.parent
MARKERS = {"hidden test": "HIDDEN-TEXT-7f3a", "rubric": "RUBRIC-TEXT-41c2", "public test": "PUBLIC-TEXT-23d9"}
needs_bwrap = pytest.mark.skipif(not BwrapBackend().available()[0], reason="bwrap unavailable (CI installs bubblewrap)")


def _marked(demo_course) -> None:
    """Plant a marker in a hidden test, a public test and a rubric of the demo assignment."""
    sol = demo_course.solutions / "s00_demo"
    for rel, marker in (("hidden/test_ops_hidden.py", MARKERS["hidden test"]),
                        ("tests/test_ops.py", MARKERS["public test"])):
        (sol / rel).write_text(f"# {marker}\n" + (sol / rel).read_text())
    (sol / "rubrics").mkdir()
    (sol / "rubrics" / "add.md").write_text(f"Full marks for {MARKERS['rubric']}\n")


def test_public_and_hidden_files_never_share_a_batch_and_keep_the_number_of_runs():
    files = ["hidden/test_a_hidden.py", "hidden/test_b_hidden.py", "hidden/test_c_hidden.py",
             "tests/test_a.py", "tests/test_b.py"]
    for workers in (1, 2, 4):
        groups = _groups(files, workers)
        assert all(len({f.startswith("hidden/") for f in g}) == 1 for g in groups), groups
        assert sorted(f for g in groups for f in g) == sorted(files)
        assert len(groups) <= max(2, workers), f"{len(groups)} runs for {workers} workers: {groups}"


def test_a_run_stages_no_rubric_and_a_public_run_no_hidden_file(demo_course, tmp_path):
    _marked(demo_course)
    spec = demo_course.spec("s00_demo")
    workdir = stage(root=tmp_path, name="run", master_dir=demo_course.master_dir("s00_demo"), spec=spec,
                    package_files={}, test_files=[Path("tests/test_ops.py")])
    staged = {p.relative_to(workdir).as_posix() for p in workdir.rglob("*") if p.is_file()}
    assert "tests/test_ops.py" in staged
    assert not [f for f in staged if f.startswith(("hidden/", "rubrics/"))], sorted(staged)
    assert workdir.stat().st_mode & 0o777 == 0o700  # no other uid (a run beside it) may enter
    assert list(_worker_hides(workdir, ["tests/test_ops.py"])) == [str(workdir / "tests"), str(workdir / ".judge")]


def test_the_worker_view_falls_back_with_a_visible_line_where_namespaces_are_refused(monkeypatch, capsys):
    def refused(paths, binds=(), fresh=()):
        raise OSError(1, "unshare(user, mount): Operation not permitted")

    ran = []
    monkeypatch.setattr(worker_view, "cover", refused)
    monkeypatch.setattr(worker_view.os, "execv", lambda path, argv: ran.append(argv))
    worker_view.main(["--hide", "/x/tests", "--", "/bin/true", "arg"])
    assert ran == [["/bin/true", "arg"]]
    assert capsys.readouterr().out.startswith(worker_view.NOT_BUILT)


@needs_bwrap
def test_a_submission_that_reads_tests_rubrics_and_records_shows_none_of_them(demo_course):
    """The submission walks its work dir, the folder above it and the judge's /proc entries, prints
    whatever it can read from a public test, and returns it as a value to the hidden ones. Its
    output reaches the public tests' reports (so it did run), yet no marker of a test file, a rubric
    or the judge's records appears anywhere in the results, and the in_worker helper of the public
    file still runs (its source is sent to the worker, whose view covers the test folders)."""
    _marked(demo_course)
    result = grade_assignment(course=demo_course, assignment_id="s00_demo", sandbox="bwrap", hardware="cpu",
                              submission=FIXTURES / "reads_hidden_material")
    report = json.dumps(gradescope([result]))
    for what, marker in MARKERS.items():
        assert marker not in report, f"the text of a {what} reached the report"
    assert '\\"mac\\"' not in report and "results.jsonl" not in report, "the judge's records reached the report"
    by_name = {t.test.nodeid: t for t in result.tests}
    # the worker's output reaches the test it was printed in, or the next one (its pipe is read apart)
    public = "\n".join(t.output for t in result.tests if not t.test.hidden)
    assert "[output of the submission's process]" in public and "LOOT" in public, public[-2000:]
    helper = by_name["tests/test_ops.py::test_forbidden_api_raises_but_oracle_lifts_it"]
    assert helper.status in ("passed", "held"), helper.reason  # held: the scan flags its look at the judge's pid
    for t in result.tests:
        if t.test.hidden:
            assert "LOOT" not in t.output + t.reason and "submission's process]" not in t.output, (t.test.nodeid, t.output)


@needs_bwrap
def test_bwrap_shows_no_class_folder_other_checkout_or_home(tmp_path):
    """A class folder outside /tmp (/var/tmp here), the course's instructor tree, the folder holding
    this checkout (where other checkouts would sit) and the host's home folders are not there;
    the interpreter and the grader are."""
    classroom = Path(tempfile.mkdtemp(prefix="ag-class-", dir="/var/tmp"))
    try:
        (classroom / "bob" / "demo").mkdir(parents=True)
        (classroom / "bob" / "demo" / "__init__.py").write_text("ANSWER = 42\n")
        checks = {"class folder": classroom / "bob" / "demo", "instructor tree": REPO / "solutions",
                  "/home": Path("/home"), "host /etc": Path("/etc/passwd")}
        probe = ("import json, os, sys\n"
                 f"checks = {json.dumps({k: str(v) for k, v in checks.items()})}\n"
                 "seen = {k: os.path.exists(v) for k, v in checks.items()}\n"
                 f"seen['beside the checkout'] = sorted(os.listdir({str(REPO.parent)!r}))\n"
                 f"home = {str(Path.home())!r}\n"
                 "seen['home'] = sorted(os.listdir(home)) if os.path.isdir(home) else []\n"
                 "import autograder; seen['grader'] = autograder.__file__\n"
                 "print(json.dumps(seen))\n")
        tmp_path.chmod(0o777)
        run = BwrapBackend().run(RunRequest(argv=[sys.executable, "-c", probe], workdir=tmp_path, wall_s=60,
                                            memory_mb=4096, env={"PYTHONPATH": str(REPO)},
                                            expose=(REPO / "autograder",)))
        assert run.returncode == 0, run.output
        seen = json.loads(run.output.strip().splitlines()[-1])
        visible = [k for k in checks if seen[k]]
        assert not visible, f"visible inside bwrap: {visible}"
        # a home folder holds at most the way to the interpreter (pyenv under /root), nothing else
        on_the_way = {p.relative_to(Path.home()).parts[0] for p in _prefixes() if Path.home() in p.parents}
        assert set(seen["home"]) <= on_the_way, f"the home folder shows {seen['home']}"
        assert seen["beside the checkout"] == [REPO.name], seen["beside the checkout"]
        assert seen["grader"].startswith(str(REPO / "autograder")), seen["grader"]
    finally:
        shutil.rmtree(classroom, ignore_errors=True)


def test_without_a_network_namespace_the_none_sandbox_runs_and_says_so(monkeypatch, tmp_path):
    from autograder.sandbox import none

    monkeypatch.setattr(none, "network_isolation", lambda: "no right to make a network namespace")
    monkeypatch.setattr(none.os, "geteuid", lambda: 0)
    assert any("host's network" in n for n in NoneBackend().notes())
    tmp_path.chmod(0o777)
    run = NoneBackend().run(RunRequest(argv=[sys.executable, "-c", "print('ran')"], workdir=tmp_path, env={},
                                       wall_s=30, memory_mb=4096))
    assert run.returncode == 0 and "ran" in run.output, run.output


CAPSH = shutil.which("capsh")


@pytest.mark.skipif(os.geteuid() != 0 or CAPSH is None, reason="needs root and capsh to drop the capabilities")
def test_a_grading_without_namespace_rights_writes_complete_results_with_a_note(demo_course, tmp_path):
    """Root without CAP_SYS_ADMIN and CAP_NET_ADMIN (Docker's default set): bwrap cannot start, the
    rlimits-only sandbox cannot make a network namespace; the grading still scores the reference in
    full and its results.json says what was not enforced."""
    out = tmp_path / "results.json"
    command = (f"{sys.executable} -m autograder --root {demo_course.root} grade s00_demo --solution "
               f"--hardware cpu --json {out}")
    proc = subprocess.run([CAPSH, "--drop=cap_sys_admin,cap_net_admin", "--", "-c", command], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert out.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert "grading_failed" not in data.get("extra_data", {}), data["output"]
    assert data["score"] == 11.0, data["output"]  # every CPU-gradable point of the demo reference
    assert "host's network" in data["output"], data["output"]


def test_a_hidden_tests_reason_keeps_the_judges_words_and_drops_the_workers():
    from autograder.judge.feedback import hidden_reason, hidden_violation

    secret = "def test_secret_case(): assert f(3) == 9"
    assert hidden_reason(NotImplementedError("s01.2: rms_norm")) == "NotImplementedError: s01.2: rms_norm"
    assert secret not in hidden_reason(AssertionError(f"assert {secret!r} == 2.0"))
    assert secret not in hidden_reason(type("Secret", (Exception,), {})(secret))
    assert "Secret" not in hidden_reason(type("Secret", (Exception,), {})("x"))  # a type it named is its text too
    verdict = (f"the submission ran aten::mm_{secret} (forbidden here: aten::mm*); implement it yourself; "
               f"the submission computed with aten::add (called at ops.py:3 {secret}) outside its own Triton "
               "kernels; in this exercise only allocation, views, copies and casts may run outside them; "
               f"{secret}")
    kept = hidden_violation(verdict)
    assert secret not in kept and "forbidden here (aten::mm*)" in kept and "outside its own Triton kernels" in kept


def test_a_hidden_failure_is_explained_for_the_reference_and_redacted_for_a_submission(demo_course, tmp_path):
    """Grading the course's own reference, an instructor reads why a hidden test failed (its message
    and output); the same code handed in as a submission gets the redacted line."""
    hidden = demo_course.solution_dir("s00_demo") / "hidden" / "test_ops_hidden.py"
    hidden.write_text(hidden.read_text() + '\n\n@pytest.mark.points(1)\ndef test_reveal_probe():\n'
                      '    print("probe-output-7")\n    assert add(1, 2) == 4, "probe-message-7"\n')
    sub = tmp_path / "submission"
    shutil.copytree(demo_course.solution_dir("s00_demo") / "demo", sub / "demo")
    for solution, kwargs in ((True, {"solution": True}), (False, {"submission": sub})):
        result = grade_assignment(course=demo_course, assignment_id="s00_demo", only_files=[f"hidden/{hidden.name}"],
                                  **kwargs)
        probe = next(t for t in result.tests if t.test.nodeid.endswith("test_reveal_probe"))
        text = probe.reason + probe.output
        assert probe.status == "failed", (solution, probe.status, text)
        assert ("probe-message-7" in text and "probe-output-7" in text) == solution, (solution, text)
