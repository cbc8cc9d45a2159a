import datetime as dt

import pytest

from autograder.host.errors import GraderError
from autograder.authoring.release import build_release
from autograder.authoring.schedule import load_schedule, parse_schedule

WEEK = {"number": 1, "release": dt.date(2027, 1, 11), "due": dt.datetime(2027, 1, 18, 23, 59), "assignments": ["s00_demo"]}


def test_course_schedule_is_valid_and_lists_only_existing_assignments(repo_course):
    plan = load_schedule(repo_course.root / "course" / "schedule.toml", repo_course.ids())
    assert [w.number for w in plan.weeks] == list(range(1, len(plan.weeks) + 1))


@pytest.mark.parametrize("change, message", [
    ({"number": 2}, "number must be 1"),
    ({"assignments": ["s99_nope"]}, "unknown assignment 's99_nope'"),
    ({"due": dt.date(2027, 1, 1)}, "is not after release"),
    ({"release": "soon"}, "expected a TOML date"),
])
def test_schedule_errors_name_the_week_and_the_problem(change, message):
    with pytest.raises(ValueError, match=message):
        parse_schedule({"week": [dict(WEEK, **change)]}, ["s00_demo"])


def test_an_assignment_scheduled_twice_is_rejected():
    with pytest.raises(ValueError, match="scheduled twice"):
        parse_schedule({"week": [WEEK, dict(WEEK, number=2, release=dt.date(2027, 1, 18),
                                            due=dt.date(2027, 1, 25))]}, ["s00_demo"])


def test_release_ships_stubs_without_solutions_or_hidden_tests(demo_course, tmp_path):
    (demo_course.root / "course").mkdir()
    (demo_course.root / "course" / "schedule.toml").write_text(
        '[[week]]\nnumber = 1\nrelease = 2027-01-11\ndue = 2027-01-18\nassignments = ["s00_demo"]\n')
    out = tmp_path / "release"
    assert build_release(course=demo_course, week=1, out=out) == ["s00_demo"]
    shipped = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert "assignments/s00_demo/demo/ops.py" in shipped
    assert not any(s.startswith("solutions") or "hidden" in s for s in shipped)
    assert "return a + b" not in (out / "assignments/s00_demo/demo/ops.py").read_text()
    with pytest.raises(GraderError, match="already exists"):
        build_release(course=demo_course, week=1, out=out)
