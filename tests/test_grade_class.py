"""Grading a class with `autograder grade-class`: 20 generated submissions of mixed quality graded
in parallel, the command killed halfway (SIGKILL) and run again, and every total checked against
grading the same submission alone; the late policy, the exports, --regrade, written-answer points
an instructor enters, and an interrupted `grade --json` that leaves no results file behind."""

from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time

import pytest
from class_builder import CLASS, cli, graded_rows, make_class, scores_alone

from autograder.authoring.stubs import write_assignment
from autograder.host import atomic

SCHEDULE = """[[week]]
number = 1
release = 2027-01-04
due = 2027-01-10T23:59:00Z
assignments = ["s00_demo"]

[late]
grace_minutes = 10
penalty_per_day = 0.1
max_days = 3
"""
NOT_GRADABLE = {"ray": "broken_archive", "sue": "broken_archive", "fay": "broken_archive", "tom": "ambiguous",
                "pam": "ambiguous", "jo": "no_package"}
TIMES = "student,submitted_at\nada,2027-01-10T20:00:00Z\nben,2027-01-11T12:00:00Z\ncy,2027-01-16T00:00:00Z\n"
ADD_TESTS = {"test_add_small_integers", "test_forbidden_api_raises_but_oracle_lifts_it", "test_add_speed_ratio_is_recorded"}


@pytest.fixture
def scheduled(demo_course):
    (demo_course.root / "course").mkdir()
    (demo_course.root / "course" / "schedule.toml").write_text(SCHEDULE)
    return demo_course


def test_a_class_killed_halfway_and_resumed_has_every_grade_once_and_equal_to_grading_alone(scheduled, tmp_path):
    course, folder, out = scheduled, tmp_path / "class", tmp_path / "out"
    folder.mkdir()
    make_class(course, folder)
    (tmp_path / "times.csv").write_text(TIMES)
    argv = cli(course, "grade-class", "s00_demo", str(folder), "--out", str(out), "-j", "2", "--sandbox", "none",
                "--hardware", "cpu", "--times", str(tmp_path / "times.csv"))
    graded = len(CLASS) - len(NOT_GRADABLE)
    db = out / "gradebook.sqlite"

    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 240
        while len(graded_rows(db)) < 3 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)  # the whole command: driver and worker processes
        first.wait()
    before = graded_rows(db)
    assert 3 <= len(before) < graded, (tmp_path / "first.log").read_text()  # killed halfway

    second = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"{graded - len(before)} to grade, {len(before)} already recorded, 6 not gradable" in second.stdout
    after = graded_rows(db)
    assert len(after) == graded and all(after[s] == row for s, row in before.items())  # nothing graded twice

    with sqlite3.connect(db) as con:
        per_student = dict(con.execute("SELECT student, COUNT(*) FROM grades GROUP BY student").fetchall())
        statuses = dict(con.execute("SELECT student, status FROM grades WHERE current=1").fetchall())
        hashes = dict(con.execute("SELECT student, submission_hash FROM grades").fetchall())
        results = dict(con.execute("SELECT student, results_path FROM grades WHERE status='graded'").fetchall())
    assert per_student == dict.fromkeys(CLASS, 1)
    assert {s: statuses[s] for s in NOT_GRADABLE} == NOT_GRADABLE
    assert not list((out / "s00_demo" / "results").glob(f"{atomic.TEMP_PREFIX}*"))
    assert all((out / results[s]).is_file() for s in results)

    # the totals: each distinct submission graded alone (students with one hash submitted the same files)
    alone = scores_alone(course, folder, {s: hashes[s] for s in results}, tmp_path / "alone")
    assert {s: after[s][2] for s in after} == {s: alone[hashes[s]] for s in after}
    by_kind = {kind: after[s][2] for s, (kind, _) in CLASS.items() if s in after}
    assert len(alone) == 4 and by_kind["full"] == 11 and by_kind["stub"] == 0
    assert 0 < by_kind["partial_add"] < 11 and 0 < by_kind["partial_mean"] < 11

    # the LMS export: the late policy applied (ben 1 day, dee 2 days by git, cy past the limit)
    with open(out / "s00_demo" / "export" / "grades.csv") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert len(rows) == 20
    assert [rows[s]["score"] for s in ("ada", "ben", "dee", "cy", "eli")] == ["11", "9.9", "8.8", "0", "11"]
    assert rows["dee"]["submitted_at"] == "2027-01-12T10:00:00+00:00"  # from dee's own git repository
    assert rows["cy"]["auto_score"] == "11" and "past the 3-day limit" in rows["cy"]["note"]
    assert "submission time unknown" in rows["eli"]["note"]
    assert rows["ray"]["score"] == "" and rows["ray"]["status"] == "broken_archive"

    # the class report: the tests of add (failed by the stubs and partial_add) are the ones failed most
    report = (out / "s00_demo" / "export" / "report.md").read_text()
    table = [line for line in report.splitlines() if line.startswith("| `")]
    passed_of = {re.search(r"::(\w+)", line).group(1): line.split("|")[4:6] for line in table}
    assert {re.search(r"::(\w+)", line).group(1) for line in table[:3]} == ADD_TESTS
    assert passed_of["test_add_small_integers"] == [" 9 ", " 14 "] and passed_of["test_mean_matches_fsum"] == [" 10 ", " 14 "]
    assert (out / "s00_demo" / "export" / "report.png").stat().st_size > 1000


WRITTEN = '\n[[written]]\nid = "median"\npoints = 3\nquestion = "Why?"\n'
ANSWER = "# median\n> Why?\n\n<!-- BEGIN SOLUTION -->\nThe median ignores one outlier, the mean moves.\n<!-- END SOLUTION -->\n"


def test_written_points_are_pending_until_entered_and_survive_a_regrade(demo_course, tmp_path):
    sol = demo_course.solutions / "s00_demo"
    with open(sol / "assignment.toml", "a") as fh:
        fh.write(WRITTEN)
    (sol / "answers").mkdir()
    (sol / "answers" / "median.md").write_text(ANSWER)
    write_assignment(demo_course, "s00_demo")
    folder, out = tmp_path / "class", tmp_path / "out"
    shutil.copytree(sol, folder / "alice", ignore=shutil.ignore_patterns("hidden", "tests"))
    grade = cli(demo_course, "grade-class", "s00_demo", str(folder), "--out", str(out), "--sandbox", "none",
                 "--hardware", "cpu")

    def csv_rows():
        with open(out / "s00_demo" / "export" / "grades.csv") as fh:
            return {r["student"]: r for r in csv.DictReader(fh)}

    run = subprocess.run(grade, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = csv_rows()
    assert (rows["alice"]["score"], rows["alice"]["pending_points"], rows["alice"]["status"]) == (
        "11", "3", "pending manual grading (3 points)")
    assert rows["alice"]["max_score"] == "15"  # 12 automatic points here and the 3 of the written answer
    manual = cli(demo_course, "gradebook", "manual", "s00_demo", "alice", "median", "2", "--out", str(out))
    assert subprocess.run(manual, capture_output=True, text=True, check=False).returncode == 0
    assert (csv_rows()["alice"]["score"], csv_rows()["alice"]["status"]) == ("13", "graded")
    refused = subprocess.run(cli(demo_course, "gradebook", "manual", "s00_demo", "alice", "median", "4", "--out",
                                  str(out)), capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "must lie in [0, 3]" in refused.stdout

    with sqlite3.connect(out / "gradebook.sqlite") as con:
        first = con.execute("SELECT id, graded_at FROM grades WHERE student='alice'").fetchall()
    time.sleep(1.1)  # graded_at has a resolution of one second
    again = subprocess.run(grade + ["--regrade"], capture_output=True, text=True, check=False)
    assert again.returncode == 0 and "1 to grade, 0 already recorded" in again.stdout
    with sqlite3.connect(out / "gradebook.sqlite") as con:
        regraded = con.execute("SELECT id, graded_at FROM grades WHERE student='alice'").fetchall()
    assert len(regraded) == 1 and regraded[0][0] == first[0][0] and regraded[0][1] > first[0][1]
    assert csv_rows()["alice"]["score"] == "13"  # the same submission keeps the instructor's points
    shown = subprocess.run(cli(demo_course, "gradebook", "show", "s00_demo", "--out", str(out)),
                           capture_output=True, text=True, check=False)
    assert shown.returncode == 0 and "13/15" in shown.stdout


def test_an_interrupted_grading_writes_no_results_file(demo_course, tmp_path):
    sub = tmp_path / "slow"
    shutil.copytree(demo_course.solutions / "s00_demo" / "demo", sub / "demo")
    started = tmp_path / "importing"
    with open(sub / "demo" / "__init__.py", "a") as fh:  # importing takes a while: time to press Ctrl-C
        fh.write(f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(20)\n")
    out = tmp_path / "results.json"
    proc = subprocess.Popen(cli(demo_course, "grade", "s00_demo", "--submission", str(sub), "--sandbox", "none",
                                 "--hardware", "cpu", "--json", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            # as from a terminal: Ctrl-C's default action, even if this process (pytest, or a
                            # shell's background job) inherited SIGINT ignored, which its children would keep
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 90  # Ctrl-C once the grading runs (the grader's start-up varies with load)
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert started.exists(), "the grading never reached the submission's import"
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130 and not out.exists()
    assert not list(tmp_path.glob(f"{atomic.TEMP_PREFIX}*"))


def test_an_atomic_write_that_fails_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    atomic.write_text(path, '{"score": 7}')

    def fail(_fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        atomic.write_text(path, '{"score": 0')
    assert path.read_text() == '{"score": 7}' and [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_two_class_gradings_never_write_one_gradebook_at_once(demo_course, tmp_path):
    import fcntl

    from autograder.classroom.grade_class import ClassOptions, grade_class
    from autograder.errors import GraderError

    (tmp_path / "class").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a running grade-class holds it
        with pytest.raises(GraderError, match="another grade-class is writing"):
            grade_class(course=demo_course, assignment_id="s00_demo", folder=tmp_path / "class", out=out,
                        options=ClassOptions(), say=lambda _line: None)
    summary = grade_class(course=demo_course, assignment_id="s00_demo", folder=tmp_path / "class", out=out,
                          options=ClassOptions(), say=lambda _line: None)
    assert summary.graded == [] and (out / "gradebook.sqlite").is_file()
    with pytest.raises(ValueError, match="jobs must be"):
        ClassOptions(jobs=0)


def test_the_local_engine_grades_at_most_one_submission_per_core_and_says_so():
    from autograder.classroom.engines import jobs_this_host_holds

    assert jobs_this_host_holds(2, cpus=4) == (2, None)
    jobs, why = jobs_this_host_holds(8, cpus=2)
    assert jobs == 2 and "-j 8" in why and "2 cores" in why
