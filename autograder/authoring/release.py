"""Build the student release of weeks 1..N: the generated assignments, the grader, the course notes;
and publish it as the next commit of a student repository.

No `solutions/`, no hidden tests, no mutants: invariant 4 is checked on the folder it writes. The
student's README and Makefile (course/student/), not the instructor's. Only what is out by week N: the stage notes of
the stages released so far (without any instructor section, which would name hidden test files and the mutants), the
schedule's weeks 1..N; no instructor appendix (course/instructor-appendix.md: what each suite checks) nor the syllabus
section that links it; no GPU-runner scripts (calibration and CI are the instructor's).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from autograder.authoring.schedule import load_schedule
from autograder.authoring.stubs import leaked_solutions, stale_paths
from autograder.host.course_files import INSTRUCTOR_ONLY, ignore
from autograder.errors import GraderError
from autograder.host.repo import Course

SHIPPED = ("pyproject.toml", ".gitignore", "autograder", "datasets", "coursedata")
# The student's README and Makefile (setup, grade, schedule, interop), not the instructor's.
STUDENT_FILES = {"README.md": "course/student/README.md", "Makefile": "course/student/Makefile"}
IGNORED = ignore(*INSTRUCTOR_ONLY)
# Sections a shipped note loses, heading to the next heading: a stage note's test table (hidden files, mutants), the
# syllabus's link to the instructor appendix.
INSTRUCTOR_SECTIONS = ("## Which tests check what", "## For instructors")
INSTRUCTOR_FILES = ("instructor-*.md",)  # course/instructor-appendix.md: hidden suites, mutants, calibration runs


def build_release(*, course: Course, week: int, out: Path) -> list[str]:
    """Write the release into `out` (which must not exist); returns the assignment ids shipped."""
    schedule = load_schedule(course.root / "course" / "schedule.toml", course.ids(),
                             specs={aid: course.spec(aid) for aid in course.ids()})
    ids = schedule.released_by(week)
    if not ids:
        raise GraderError(f"nothing is released by week {week}")
    if out.exists():
        raise GraderError(f"{out} already exists: choose a new folder")
    for aid in ids:
        if stale := stale_paths(course, aid):
            raise GraderError(f"{aid}: assignments/ is stale ({stale[0]}); run `make assignments` first")
    out.mkdir(parents=True)
    for name in SHIPPED:
        source = course.root / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=IGNORED)
        elif source.is_file():
            shutil.copy2(source, out / name)
    for name, source in STUDENT_FILES.items():
        if (course.root / source).is_file():
            shutil.copy2(course.root / source, out / name)
    _ship_course_notes(course, {course.spec(aid).stage for aid in ids}, schedule_text(course, week), out)
    for aid in ids:
        shutil.copytree(course.assignments / aid, out / "assignments" / aid, ignore=IGNORED)
    if leaks := leaked_solutions(out / "assignments"):
        shutil.rmtree(out)
        raise GraderError(f"the release would leak: {', '.join(leaks[:5])}")
    return ids


def _ship_course_notes(course: Course, stages: set[int], schedule: str, out: Path) -> None:
    """course/ as of week N: the notes of the released stages, weeks 1..N of the schedule."""
    source = course.root / "course"
    if not source.is_dir():
        return
    shutil.copytree(source, out / "course",
                    ignore=ignore(*INSTRUCTOR_ONLY, *INSTRUCTOR_FILES, "stages", "schedule.toml", "student"))
    if (syllabus := out / "course" / "README.md").is_file():
        syllabus.write_text(student_note(syllabus.read_text()))
    (out / "course" / "schedule.toml").write_text(schedule)
    (out / "course" / "stages").mkdir()
    for note in sorted((source / "stages").glob("*.md")):
        if (m := re.match(r"(\d+)-", note.name)) and int(m.group(1)) in stages:
            (out / "course" / "stages" / note.name).write_text(student_note(note.read_text()))


def student_note(text: str) -> str:
    """A note without its instructor sections (each from its heading to the next one, or the end)."""
    for heading in INSTRUCTOR_SECTIONS:
        while (start := text.find("\n" + heading)) >= 0:
            end = text.find("\n## ", start + 1)
            text = text[: start + 1].rstrip("\n") + "\n" + (text[end:] if end >= 0 else "")
    return text


def schedule_text(course: Course, week: int) -> str:
    """course/schedule.toml cut after week N: its header and the paragraphs (comment + [[week]]) of
    weeks 1..N, so `autograder schedule` in the release lists what is out and nothing later."""
    text = (course.root / "course" / "schedule.toml").read_text()
    kept = []
    for paragraph in text.split("\n\n"):
        number = re.search(r"^number\s*=\s*(\d+)", paragraph, re.MULTILINE)
        if "[[week]]" not in paragraph or (number and int(number.group(1)) <= week):
            kept.append(paragraph.strip("\n"))
    return "\n\n".join(kept) + "\n"


RELEASE_AUTHOR = ("-c", "user.name=course releases", "-c", "user.email=releases@course.invalid")


def publish(release: Path, repo: Path, week: int) -> str:
    """Commit the release folder as the next commit of the student repository `repo` (created on
    first use, branch main): its tree becomes the release's, whatever the last one held. The
    repository only ever holds releases, so its history never held solutions/ or hidden tests, and
    a student whose clone tracks it merges week N+1 into their own work with `git pull`.
    Returns the new commit's id."""
    if not (repo / ".git").is_dir():
        repo.mkdir(parents=True, exist_ok=True)
        _git(repo, "init", "-q", "-b", "main")
    for child in repo.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    shutil.copytree(release, repo, dirs_exist_ok=True)
    _git(repo, "add", "-A")
    if not _git(repo, "status", "--porcelain"):
        raise GraderError(f"week {week}: the release is the same as the last commit of {repo}; nothing to publish")
    _git(repo, *RELEASE_AUTHOR, "commit", "-q", "-m", f"week {week}")
    return _git(repo, "rev-parse", "HEAD").strip()


def _git(repo: Path, *args: str) -> str:
    run = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    if run.returncode:
        raise GraderError(f"git {' '.join(args)} in {repo} failed: {run.stderr.strip() or run.stdout.strip()}")
    return run.stdout
