"""A student's quick loop: plain pytest in an assignment folder knows the course's marks."""

import subprocess
import sys


def test_plain_pytest_in_an_assignment_folder_warns_of_no_unknown_mark(demo_course):
    folder = demo_course.root / "assignments" / "s00_demo"
    run = subprocess.run([sys.executable, "-m", "pytest", "tests", "-q", "--collect-only", "-p", "no:cacheprovider",
                          "-W", "error::pytest.PytestUnknownMarkWarning"],
                         cwd=folder, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "PytestUnknownMarkWarning" not in run.stdout + run.stderr
