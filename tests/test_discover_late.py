"""Finding each student's package in a class folder (any depth, archives, ambiguous layouts), and
the late policy (schedule due dates, a validated [late] table, submission times)."""

from __future__ import annotations

import datetime as dt
import io
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from autograder.classroom.discover import (
    AMBIGUOUS,
    BROKEN_ARCHIVE,
    NO_PACKAGE,
    Entry,
    UnpackError,
    find_roots,
    list_entries,
    locate,
    unpack,
)
from autograder.host.fingerprint import submission_hash
from autograder.classroom.late import (
    LatePolicy,
    assess,
    due_date,
    git_commit_time,
    load_policy,
    parse_policy,
    read_times,
)
from autograder.errors import GraderError

UTC = dt.UTC


def _package(root: Path, body: str = "x = 1\n") -> Path:
    (root / "demo").mkdir(parents=True)
    (root / "demo" / "__init__.py").write_text(body)
    return root


def test_the_package_is_found_at_any_depth_and_two_packages_are_ambiguous(tmp_path):
    _package(tmp_path / "dave" / "s00_demo" / "inner")
    (tmp_path / "dave" / ".git" / "demo").mkdir(parents=True)  # hidden folders are not searched
    (tmp_path / "dave" / ".git" / "demo" / "__init__.py").write_text("")
    found = locate(Entry("dave", tmp_path / "dave"), "demo", tmp_path / "work")
    assert found.root == tmp_path / "dave" / "s00_demo" / "inner" and not found.problem
    _package(tmp_path / "erin" / "v1")
    _package(tmp_path / "erin" / "v2")
    twice = locate(Entry("erin", tmp_path / "erin"), "demo", tmp_path / "work")
    assert twice.problem == AMBIGUOUS and "v1/demo" in twice.detail and "v2/demo" in twice.detail
    (tmp_path / "fay" / "demo").mkdir(parents=True)  # no __init__.py: not the package
    none = locate(Entry("fay", tmp_path / "fay"), "demo", tmp_path / "work")
    assert none.problem == NO_PACKAGE and "no folder demo/" in none.detail


def test_a_package_inside_the_package_is_not_a_second_one(tmp_path):
    _package(tmp_path / "s")
    _package(tmp_path / "s" / "demo" / "vendored")
    assert find_roots(tmp_path / "s", "demo") == [tmp_path / "s"]


def test_entries_are_named_after_students_and_two_entries_for_one_are_reported(tmp_path):
    _package(tmp_path / "alice")
    _package(tmp_path / "bob")
    (tmp_path / "bob.tar.gz").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    entries, doubles, ignored = list_entries(tmp_path)
    assert [e.student for e in entries] == ["alice"]
    assert doubles[0].student == "bob" and doubles[0].problem == AMBIGUOUS and "bob.tar.gz" in doubles[0].detail
    assert ignored == ["notes.txt: neither a folder nor an archive, ignored"]


def _zip(path: Path, members: dict[str, bytes], link: str = "") -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, "/etc/passwd")
    return path


def test_archives_unpack_without_escaping_and_broken_ones_are_reported(tmp_path):
    good = _zip(tmp_path / "a.zip", {"sub/demo/__init__.py": b"x = 1\n"}, link="sub/demo/leak.py")
    found = locate(Entry("a", good), "demo", tmp_path / "work")
    assert found.root == tmp_path / "work" / "a" / "sub" and not (found.root / "demo" / "leak.py").exists()
    with pytest.raises(UnpackError, match="outside the archive"):
        unpack(_zip(tmp_path / "evil.zip", {"../../escape.py": b""}), tmp_path / "evil")
    assert not (tmp_path / "escape.py").exists()
    tgz = tmp_path / "t.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        data = b"x = 1\n"
        info = tarfile.TarInfo("demo/__init__.py")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(tgz.read_bytes()[:40])
    assert locate(Entry("t", tgz), "demo", tmp_path / "work").root == tmp_path / "work" / "t"
    broken = locate(Entry("cut", truncated), "demo", tmp_path / "work")
    assert broken.problem == BROKEN_ARCHIVE and "cut.tar.gz does not unpack" in broken.detail


def test_the_submission_hash_counts_only_what_grading_reads(demo_course, tmp_path):
    spec = demo_course.spec("s00_demo")
    one = _package(tmp_path / "one", "a = 1\n")
    two = _package(tmp_path / "two" / "deeper", "a = 1\n")
    (two / "notes.txt").write_text("not graded")
    (two / "demo" / "__pycache__").mkdir()
    (two / "demo" / "__pycache__" / "x.pyc").write_bytes(b"cache")
    assert submission_hash(one, spec) == submission_hash(two, spec)
    (two / "demo" / "__init__.py").write_text("a = 2\n")
    assert submission_hash(one, spec) != submission_hash(two, spec)


def test_the_late_policy_is_validated():
    assert parse_policy({"grace_minutes": 10, "penalty_per_day": 0.1, "max_days": 3}) == LatePolicy(10, 0.1, 3)
    for table, message in [({"penalty_per_day": 1.5}, "fraction in"), ({"grace_minutes": -1}, ">= 0"),
                           ({"max_days": 2.5}, "whole number"), ({"max_day": 2}, "unknown key")]:
        with pytest.raises(ValueError, match=message):
            parse_policy(table)


def test_days_late_count_started_days_after_the_grace_and_stop_at_the_limit():
    due = dt.datetime(2027, 1, 10, 23, 59, tzinfo=UTC)
    policy = LatePolicy(grace_minutes=10, penalty_per_day=0.1, max_days=3)
    assert assess(policy, due, due + dt.timedelta(minutes=9)).penalty == 0
    one = assess(policy, due, due + dt.timedelta(minutes=11))
    assert (one.days_late, one.penalty, one.note) == (1, 0.1, "1 day late: -10%")
    assert assess(policy, due, due + dt.timedelta(days=2, minutes=11)).days_late == 3
    past = assess(policy, due, due + dt.timedelta(days=4))
    assert past.penalty == 1.0 and "past the 3-day limit" in past.note
    unknown = assess(policy, due, None)
    assert unknown.flagged and unknown.penalty == 0 and "time unknown" in unknown.note
    assert assess(policy, None, due).flagged


def test_due_dates_and_the_policy_come_from_the_schedule(demo_course):
    (demo_course.root / "course").mkdir()
    (demo_course.root / "course" / "schedule.toml").write_text(
        '[[week]]\nnumber = 1\nrelease = 2027-01-04\ndue = 2027-01-10T23:59:00Z\nassignments = ["s00_demo"]\n\n'
        "[late]\npenalty_per_day = 0.25\n")
    assert due_date(demo_course, "s00_demo") == dt.datetime(2027, 1, 10, 23, 59, tzinfo=UTC)
    assert load_policy(demo_course) == LatePolicy(0, 0.25, None)
    (demo_course.root / "course" / "schedule.toml").write_text("[late]\npenalty_per_day = 2\n[[week]]\n")
    with pytest.raises(GraderError, match="penalty_per_day must be a fraction"):
        load_policy(demo_course)


def test_submission_times_come_from_a_csv_or_the_students_own_git_repository(tmp_path):
    (tmp_path / "times.csv").write_text("student,submitted_at\nalice,2027-01-11T08:00:00+01:00\nbob,2027-01-09 12:00\n")
    times = read_times(tmp_path / "times.csv")
    assert times == {"alice": dt.datetime(2027, 1, 11, 7, tzinfo=UTC), "bob": dt.datetime(2027, 1, 9, 12, tzinfo=UTC)}
    (tmp_path / "bad.csv").write_text("student,submitted_at\nalice,yesterday\n")
    with pytest.raises(GraderError, match="not an ISO 8601 time"):
        read_times(tmp_path / "bad.csv")
    repo = _package(tmp_path / "class" / "carol" / "work")
    env = os.environ | {"GIT_COMMITTER_DATE": "2027-01-12T10:00:00+00:00", "GIT_AUTHOR_DATE": "2027-01-01T00:00:00Z",
                        "GIT_AUTHOR_NAME": "c", "GIT_AUTHOR_EMAIL": "c@x", "GIT_COMMITTER_NAME": "c",
                        "GIT_COMMITTER_EMAIL": "c@x"}
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "done"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, env=env)
    assert git_commit_time(repo, tmp_path / "class" / "carol") == dt.datetime(2027, 1, 12, 10, tzinfo=UTC)
    # a repository around the student's folder (the instructor's own) says nothing of the student
    assert git_commit_time(repo / "demo", repo / "demo") is None
