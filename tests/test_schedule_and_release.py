import dataclasses
import datetime as dt
import re
from pathlib import Path

import pytest

from autograder.errors import GraderError
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


def _spec_giving(solves: str):
    from autograder.host.spec import parse_spec

    return parse_spec({"assignment": {"id": "p1_later", "title": "t", "stage": 6, "package": "later",
                                      "editable": ["later/*.py"]},
                       "given": [{"file": "later/kernel.py", "solves": solves}]})


def _two_weeks(second_release: dt.date):
    return parse_schedule({"week": [WEEK, {"number": 2, "release": second_release, "due": dt.date(2027, 2, 15),
                                           "assignments": ["p1_later"]}]}, ["s00_demo", "p1_later"])


def test_a_given_answer_is_released_only_after_its_exercise_is_due():
    later = _spec_giving("s00_demo")
    specs = {"s00_demo": dataclasses.replace(later, id="s00_demo", given=()), "p1_later": later}
    _two_weeks(dt.date(2027, 1, 25)).check_given(specs)  # released after s00_demo's due date: fine
    with pytest.raises(ValueError, match=r"gives later/kernel.py, the answer to s00_demo, before s00_demo is due"):
        _two_weeks(dt.date(2027, 1, 18)).check_given(specs)  # released on the due day, before 23:59


def test_a_given_file_must_name_a_known_exercise_and_stay_in_the_folder():
    from autograder.host.spec import parse_spec

    with pytest.raises(ValueError, match="solves unknown assignment 's03_nope'"):
        _two_weeks(dt.date(2027, 1, 25)).check_given({"p1_later": _spec_giving("s03_nope")})
    base = {"assignment": {"id": "p1_later", "title": "t", "stage": 6, "package": "later", "editable": ["x"]}}
    with pytest.raises(ValueError, match="inside the assignment folder"):
        parse_spec(base | {"given": [{"file": "../s04/k.py", "solves": "s04_kernels"}]})
    with pytest.raises(ValueError, match=r"\[\[given\]\] #1: unknown key 'from'"):
        parse_spec(base | {"given": [{"file": "k.py", "solves": "s04_kernels", "from": "x"}]})


def test_the_course_gives_p1_stage_5_1_and_4_only_after_they_are_due(repo_course):
    from autograder.authoring.invariants import check_given, check_schedule

    given = repo_course.spec("p1_minivllm").given
    assert [(g.name, g.solves) for g in given] == [("kvcache/", "s05_kvcache"), ("transformer/", "s01_transformer"),
                                                  ("minivllm/paged_decode_triton.py", "s04_kernels")]
    plan = load_schedule(repo_course.root / "course" / "schedule.toml", repo_course.ids())
    for g in given:
        assert plan.week_of("p1_minivllm").release >= plan.week_of(g.solves).due
    assert check_schedule(repo_course) == [] and check_given(repo_course, "p1_minivllm") == []


def test_a_given_file_must_exist_and_ship_whole(demo_course):
    from autograder.authoring.invariants import check_given

    sol = demo_course.solutions / "s00_demo"
    with open(sol / "assignment.toml", "a") as fh:
        fh.write('\n[[given]]\nfile = "demo/kernel.py"\nsolves = "s00_demo"\n')
    assert check_given(demo_course, "s00_demo") == ["s00_demo: [[given]] demo/kernel.py does not exist"]
    (sol / "demo" / "kernel.py").write_text("def f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n")
    assert "has a solution region" in check_given(demo_course, "s00_demo")[0]
    (sol / "demo" / "kernel.py").write_text("def f():\n    return 1\n")
    assert check_given(demo_course, "s00_demo") == []


def test_check_names_a_broken_variant_whose_text_is_gone(demo_course):
    """A mutant's `find` text must occur once in its file: after the reference (or an answer file)
    changes, `autograder check` says which mutant no longer applies."""
    from autograder.authoring.invariants import check_mutants

    mutants = demo_course.solutions / "s00_demo" / "mutants.toml"
    mutants.write_text('[[mutant]]\nname = "sub"\nfile = "demo/ops.py"\nfind = "return a + b"\n'
                       'replace = "return a - b"\ntests = ["tests/test_ops.py"]\n')
    assert check_mutants(demo_course, "s00_demo") == []
    mutants.write_text(mutants.read_text().replace("return a + b", "return a * b"))
    (problem,) = check_mutants(demo_course, "s00_demo")
    assert "mutant 'sub'" in problem and "occurs 0 times in demo/ops.py" in problem


def test_week_two_ships_only_what_is_out_by_week_two(repo_course, tmp_path):
    """The stage notes of the released stages only, without their instructor section (hidden test files,
    mutants); the schedule's weeks 1..2, which `autograder schedule` reads inside the release; no GPU-runner
    scripts (calibration and CI are the instructor's)."""
    import subprocess
    import sys

    out = tmp_path / "week2"
    ids = build_release(course=repo_course, week=2, out=out)
    stages = {repo_course.spec(aid).stage for aid in ids}
    notes = sorted(p.name for p in (out / "course" / "stages").iterdir())
    assert notes and all(int(name[:2]) in stages for name in notes), (notes, stages)
    for note in notes:
        text = (out / "course" / "stages" / note).read_text()
        assert "Which tests check what" not in text and "mutants.toml" not in text and "_hidden.py" not in text, note
    assert not (out / "course" / "instructor-appendix.md").exists()  # hidden suites, mutants, calibration runs
    syllabus = (out / "course" / "README.md").read_text()
    assert "## The 16 stages" in syllabus and "instructor-appendix" not in syllabus and "For instructors" not in syllabus
    assert not (out / "gpu_runners").exists()
    readme, makefile = (out / "README.md").read_text(), (out / "Makefile").read_text()
    assert "git pull course main" in readme and "## Instructors" not in readme  # the student's README
    targets = set(re.findall(r"^([a-z-]+):", makefile, re.MULTILINE))
    assert {"grade", "setup", "schedule"} <= targets and not targets & {"release", "mutation", "gradescope", "test"}
    dry = subprocess.run(["make", "-n", "grade", "A=s01_transformer"], cwd=out, capture_output=True, text=True,
                         timeout=60, check=False)
    assert dry.returncode == 0 and "autograder grade s01_transformer" in dry.stdout, dry.stderr
    listed = subprocess.run([sys.executable, "-m", "autograder", "schedule"], cwd=out, capture_output=True, text=True,
                            env={"PYTHONPATH": str(out), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[1].rstrip(":") for line in listed.stdout.splitlines() if line.startswith("week ")] == ["1", "2"]
    assert all(aid in listed.stdout for aid in ids)


def test_a_stage_notes_instructor_section_is_cut_up_to_the_next_heading():
    from autograder.authoring.release import student_note

    note = "# S\n\n## Goals\ng\n\n## Which tests check what (`s0`)\n| t | `hidden/x.py` |\n\n## After\na\n"
    assert student_note(note) == "# S\n\n## Goals\ng\n\n## After\na\n"
    assert student_note("# S\n\n## Which tests check what\nx\n") == "# S\n"
    assert student_note("# S\n") == "# S\n"
    two = "# S\n\n## Which tests check what (a)\nx\n\n## P\np\n\n## Which tests check what (b)\ny\n\n## For instructors\nz\n"
    assert student_note(two) == "# S\n\n## P\np\n"


def test_the_stage_notes_teach_and_leave_grading_internals_to_the_instructor_appendix():
    """Which hidden test checks what, the mutants and the calibration runs live in
    course/instructor-appendix.md (never shipped); a note that names them would ship them."""
    root = Path(__file__).resolve().parents[1] / "course"
    for note in sorted((root / "stages").glob("*.md")):
        text = note.read_text()
        found = [w for w in ("Which tests check what", "`hidden/", "_hidden.py", "mutants.toml", "hidden test",
                             "the grader forbids", "calibration run") if w in text]
        assert not found, f"{note.name} names grading internals {found}: move them to course/instructor-appendix.md"
    assert "](instructor-appendix.md)" in (root / "README.md").read_text()


def test_releases_are_commits_a_student_merges_into_their_own_work(demo_course, tmp_path):
    """Week 1 and week 2 published to a student repository: its history holds releases only (no
    solutions/, no hidden tests in any commit), and a student's clone with work of their own on
    week 1 merges week 2 with `git pull` without a conflict."""
    import subprocess

    from autograder.authoring.release import RELEASE_AUTHOR, publish

    def git(cwd, *args):
        return subprocess.run(["git", *RELEASE_AUTHOR, *args], cwd=cwd, capture_output=True, text=True,
                              check=True).stdout

    (demo_course.root / "course").mkdir(exist_ok=True)
    (demo_course.root / "course" / "schedule.toml").write_text(
        '[[week]]\nnumber = 1\nrelease = 2027-01-11\ndue = 2027-01-18\nassignments = ["s00_demo"]\n')
    hub = tmp_path / "student-repo"
    build_release(course=demo_course, week=1, out=tmp_path / "w1")
    publish(tmp_path / "w1", hub, 1)
    student = tmp_path / "alice"
    git(tmp_path, "clone", "-q", str(hub), str(student))
    ops = student / "assignments" / "s00_demo" / "demo" / "ops.py"
    ops.write_text(ops.read_text() + "\n# alice's work\n")
    git(student, "commit", "-qam", "my work")

    from autograder.authoring.stubs import write_assignment

    handout = demo_course.solutions / "s00_demo" / "README.md"  # week 2 brings an erratum to the handout
    handout.write_text(handout.read_text().replace("\n", "\n\nAn erratum for week 2.\n", 1))
    write_assignment(demo_course, "s00_demo")
    build_release(course=demo_course, week=1, out=tmp_path / "w2")
    publish(tmp_path / "w2", hub, 2)
    git(student, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    assert "alice's work" in ops.read_text()
    assert "erratum" in (student / "assignments" / "s00_demo" / "README.md").read_text()
    paths = git(hub, "log", "--all", "--name-only", "--format=")
    assert paths and not [p for p in paths.split() if p.startswith("solutions/") or "/hidden/" in p]
    assert git(hub, "log", "--format=%s").split("\n")[:2] == ["week 2", "week 1"]
